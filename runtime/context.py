"""The handler's surroundings: ``env``, ``ctx`` and the ``WorkerEntrypoint`` base class."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

log = logging.getLogger("workers")


class Env:
    """Bindings and vars by attribute: ``env.QUEUE``, ``env.GREETING``."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"env has no binding or var named {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("env is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self._values)

    def __repr__(self) -> str:
        return f"<Env {', '.join(sorted(self._values))}>"


class ExecutionContext:
    """``ctx.waitUntil(awaitable)`` keeps work running after the handler returns; a queue
    batch succeeds only when every such task succeeds too."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Future[Any]] = []

    def waitUntil(self, awaitable: Awaitable[Any]) -> None:
        self._tasks.append(asyncio.ensure_future(awaitable))

    wait_until = waitUntil

    def passThroughOnException(self) -> None:
        """Accepted for compatibility; ocd has no origin to pass through to."""

    pass_through_on_exception = passThroughOnException

    @property
    def tasks(self) -> list[asyncio.Future[Any]]:
        return self._tasks


class WorkerEntrypoint:
    """Base class of a class-style worker: ``class Default(WorkerEntrypoint)``.

    ocd makes one instance per request or batch, with ``self.env`` and ``self.ctx`` set.
    """

    def __init__(self, ctx: ExecutionContext, env: Env) -> None:
        self.ctx = ctx
        self.env = env


_current: contextvars.ContextVar[tuple[Env, ExecutionContext]] = contextvars.ContextVar(
    "workers_current"
)


def enter(env: Env, ctx: ExecutionContext) -> contextvars.Token[tuple[Env, ExecutionContext]]:
    """Make ``env``/``ctx`` the ones ``workers.env`` and ``workers.wait_until`` use in the
    handler about to run (ocd calls this; worker code does not)."""
    return _current.set((env, ctx))


def leave(token: contextvars.Token[tuple[Env, ExecutionContext]]) -> None:
    _current.reset(token)


def _now() -> tuple[Env, ExecutionContext]:
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("workers.env and workers.wait_until work inside a handler") from None


def wait_until(awaitable: Awaitable[Any]) -> None:
    """``ctx.waitUntil`` of the handler running now."""
    _now()[1].waitUntil(awaitable)


waitUntil = wait_until


class _CurrentEnv:
    """``from workers import env``: the running handler's env."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_now()[0], name)

    def __getitem__(self, name: str) -> Any:
        return _now()[0][name]

    def __repr__(self) -> str:
        return "<env of the running handler>"


env = _CurrentEnv()

F = TypeVar("F", bound=Callable[..., Any])


def handler(fn: F) -> F:
    """Marks a module-level handler, as in Cloudflare's SDK; ocd finds handlers by name."""
    return fn


def python_to_rpc(value: Any) -> Any:
    """Values cross no RPC boundary here: ``value`` itself."""
    return value


def python_from_rpc(value: Any) -> Any:
    from runtime.values import as_js_value

    return as_js_value(value)
