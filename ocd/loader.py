"""Importing worker modules and adapting their handlers to one calling convention.

Two styles are understood, as in Cloudflare Python Workers:

* class style: ``class Default(WorkerEntrypoint)`` with ``async def fetch(self, request)`` and
  ``async def queue(self, batch, env, ctx)`` (or ``queue(self, batch)``); one instance per
  request or batch, with ``self.env`` and ``self.ctx``;
* module style: ``async def fetch(request, env, ctx)`` / ``async def queue(batch, env, ctx)``,
  or the legacy ``on_fetch`` / ``on_queue``; called with as many arguments as they take.

``scheduled(controller, env, ctx)`` (cron triggers) is found the same way. Every handler is
called with as many of its arguments as it takes, as Cloudflare does: ``fetch(self)``,
``fetch(self, request)``, ... ``fetch(self, request, env, ctx)``.

Worker modules can ``from workers import ...``: ocd registers its ``runtime`` package under
that name unless a real package called ``workers`` is installed; ``pyodide``, ``js`` and
``asgi`` come from ``runtime/_shims``, at the end of ``sys.path``, so installed packages of
those names win. A module that imported a placeholder of a feature ocd does not run
(``from js import HTMLRewriter``) is refused at load, unless its worker sets
``ignore_unsupported_bindings``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
import sysconfig
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import runtime
from ocd.config import WorkerConfig
from ocd.errors import WorkerLoadError, WorkerLoadErrors
from runtime.context import enter, leave
from runtime.unsupported import ADVICE, Unsupported

log = logging.getLogger(__name__)

Handler = Callable[[Any, runtime.Env, runtime.ExecutionContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class LoadedWorker:
    config: WorkerConfig
    module: ModuleType
    fetch: Handler | None
    queue: Handler | None
    scheduled: Handler | None = None


SHIMS = str(Path(runtime.__file__).parent / "_shims")


def install_workers_alias() -> None:
    """Make ``import workers`` give ``runtime``, and ``pyodide``/``js``/``asgi`` importable,
    without shadowing a real package."""
    if SHIMS not in sys.path:
        for name in ("pyodide", "js", "asgi"):
            if name not in sys.modules and importlib.util.find_spec(name) is not None:
                log.warning(
                    "a package named %r is installed; worker modules that import it get it "
                    "instead of ocd's stand-in",
                    name,
                )
        sys.path.append(SHIMS)
    existing = sys.modules.get("workers")
    if existing is runtime:
        return
    if existing is not None or importlib.util.find_spec("workers") is not None:
        log.warning(
            "a package named 'workers' is installed; worker modules that import 'workers' "
            "get it instead of ocd's runtime (use 'import runtime' in them)"
        )
        return
    sys.modules["workers"] = runtime


def load_workers(workers: Iterable[WorkerConfig], fresh: bool = False) -> list[LoadedWorker]:
    """Import every Python worker; raises WorkerLoadErrors with every failure, not just the
    first. ``fresh`` re-imports modules loaded before (a reload picks up changed code).
    JavaScript workers run in workerd (``ocd.js``), not here."""
    loaded: list[LoadedWorker] = []
    failures: list[WorkerLoadError] = []
    for w in workers:
        if w.js:
            continue
        try:
            loaded.append(load_worker(w, fresh))
        except WorkerLoadError as e:
            failures.append(e)
    if failures:
        raise WorkerLoadErrors(failures)
    return loaded


def _forget(worker: WorkerConfig) -> None:
    """Drop a worker's modules (and sibling modules of its entry file) from sys.modules."""
    if worker.main is not None:
        folder = str(worker.main.parent) + os.sep
        stale = [
            name
            for name, mod in sys.modules.items()
            if (getattr(mod, "__file__", None) or "").startswith(folder)
            and not _protected(name, mod)
        ]
    else:
        assert worker.module is not None
        top = worker.module.split(".")[0]
        stale = [n for n in sys.modules if n == top or n.startswith(top + ".")]
    for name in stale:
        del sys.modules[name]
    importlib.invalidate_caches()


_OURS = ("ocd", "runtime", "workers", "pyodide", "js", "asgi")
_INSTALLED = tuple(
    str(Path(p)) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _protected(name: str, mod: ModuleType) -> bool:
    """ocd itself and installed packages are never re-imported, wherever a worker lives."""
    if name.split(".")[0] in _OURS:
        return True
    return (getattr(mod, "__file__", None) or "").startswith(_INSTALLED)


def load_worker(worker: WorkerConfig, fresh: bool = False) -> LoadedWorker:
    install_workers_alias()
    if fresh:
        _forget(worker)
    module = _import(worker)
    where = f"{worker.key_path}.{'main' if worker.main else 'module'}"
    entry = getattr(module, "Default", None)
    _check_supported(worker, module, where)
    if inspect.isclass(entry):
        fetch = _class_handler(worker, entry, "fetch", where)
        queue = _class_handler(worker, entry, "queue", where)
        scheduled = _class_handler(worker, entry, "scheduled", where)
    else:
        fetch = _module_handler(worker, module, "fetch", where)
        queue = _module_handler(worker, module, "queue", where)
        scheduled = _module_handler(worker, module, "scheduled", where)
    if worker.consumers and queue is None:
        raise WorkerLoadError(
            worker.name,
            worker.source,
            where,
            f"worker {worker.name!r} consumes queue {worker.consumers[0].queue!r} but its "
            "module does not export a queue() handler",
        )
    if worker.routes and fetch is None and worker.assets is None:
        raise WorkerLoadError(
            worker.name,
            worker.source,
            where,
            f"worker {worker.name!r} has routes but its module does not export a fetch() handler",
        )
    if worker.crons and scheduled is None:
        raise WorkerLoadError(
            worker.name,
            worker.source,
            where,
            f"worker {worker.name!r} has cron triggers ({', '.join(worker.crons)}) but its "
            "module does not export a scheduled() handler",
        )
    return LoadedWorker(worker, module, fetch, queue, scheduled)


def _check_supported(worker: WorkerConfig, module: ModuleType, where: str) -> None:
    """Refuse a module that imported a placeholder of a feature ocd does not run."""
    for name, value in sorted(vars(module).items()):
        if not isinstance(value, Unsupported):
            continue
        shown = worker.main.name if worker.main is not None else worker.module
        message = f"{value.feature} is not supported by ocd; {ADVICE}"
        if worker.ignore_unsupported_bindings:
            log.warning(
                "worker %s: %s (imported as %s; ignore_unsupported_bindings: it raises "
                "NotImplementedError when used)",
                worker.name,
                message,
                name,
                extra={"event": "unsupported_ignored", "worker": worker.name},
            )
            continue
        raise WorkerLoadError(worker.name, worker.source, where, f"{shown}: {message}")


def _import(worker: WorkerConfig) -> ModuleType:
    if worker.main is not None:
        return _import_file(worker, worker.main)
    assert worker.module is not None
    name = worker.module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise WorkerLoadError(
                worker.name,
                worker.source,
                f"{worker.key_path}.module",
                f"module not found: {name!r} (is it on sys.path / installed?)",
            ) from e
        raise _raised(worker, f"{worker.key_path}.module", name) from e
    except Exception as e:
        raise _raised(worker, f"{worker.key_path}.module", name) from e


def _import_file(worker: WorkerConfig, path: Path) -> ModuleType:
    key = f"{worker.key_path}.main"
    if not path.is_file():
        raise WorkerLoadError(worker.name, worker.source, key, f"file not found: {path}")
    # Sibling modules of the entry file import each other by plain name, as on Cloudflare.
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod_name = "ocd_worker_" + "".join(c if c.isalnum() else "_" for c in worker.name)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise WorkerLoadError(worker.name, worker.source, key, f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(mod_name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _raised(worker, key, str(path)) from e
    return module


def _raised(worker: WorkerConfig, key: str, what: str) -> WorkerLoadError:
    return WorkerLoadError(
        worker.name,
        worker.source,
        key,
        f"worker {worker.name!r}: importing {what} raised an exception",
        detail=traceback.format_exc(),
    )


def _accepts(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (a large number for ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    n = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return 99
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def _require_async(worker: WorkerConfig, fn: Any, label: str, where: str) -> None:
    if not inspect.iscoroutinefunction(fn):
        raise WorkerLoadError(
            worker.name,
            worker.source,
            where,
            f"worker {worker.name!r}: handler {label} must be an 'async def' function",
        )


def _class_handler(worker: WorkerConfig, cls: type, name: str, where: str) -> Handler | None:
    method = getattr(cls, name, None)
    if method is None:
        return None
    _require_async(worker, method, f"Default.{name}", where)
    # Unbound function: the first parameter is self.
    n = max(0, min(_accepts(method) - 1, 3))

    async def call(event: Any, env: runtime.Env, ctx: runtime.ExecutionContext) -> Any:
        token = enter(env, ctx)
        try:
            instance = cls(ctx, env)
            return await getattr(instance, name)(*(event, env, ctx)[:n])
        finally:
            leave(token)

    return call


def _module_handler(
    worker: WorkerConfig, module: ModuleType, name: str, where: str
) -> Handler | None:
    fn = getattr(module, name, None)
    label = name
    if fn is None:
        fn = getattr(module, f"on_{name}", None)
        label = f"on_{name}"
    if fn is None:
        return None
    _require_async(worker, fn, label, where)
    n = min(_accepts(fn), 3)
    target = fn

    async def call(event: Any, env: runtime.Env, ctx: runtime.ExecutionContext) -> Any:
        token = enter(env, ctx)
        try:
            return await target(*(event, env, ctx)[:n])
        finally:
            leave(token)

    return call
