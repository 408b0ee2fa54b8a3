"""The in-process handler kind: a Python worker's ``queue(batch, env, ctx)``, run under its
wall-clock limit together with its ``ctx.waitUntil`` tasks. Used by push dispatchers and by
``ocd consume`` alike."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ocd.pipeline import ABORTED, OUTCOME_OK, Outcome
from ocd.store import Delivery
from runtime import ExecutionContext, MessageBatch

log = logging.getLogger(__name__)

QueueCall = Callable[[MessageBatch, ExecutionContext], Awaitable[Any]]


class PythonInvoke:
    """``Invoke`` for a Python handler. ``abort`` set (a shutdown that stopped waiting)
    ends the handler and answers ``aborted``."""

    python_bodies = True
    self_checked: frozenset[str] = frozenset()

    def __init__(
        self,
        call: QueueCall,
        timeout_s: float,
        abort: asyncio.Event,
        worker: str,
        queue: str,
    ) -> None:
        self.call = call
        self.timeout_s = timeout_s
        self.abort = abort
        self.worker = worker
        self.queue = queue

    async def __call__(self, batch: MessageBatch, deliveries: Sequence[Delivery]) -> Outcome:
        ctx = ExecutionContext()
        deadline = time.monotonic() + self.timeout_s
        outcome = await self._await(asyncio.ensure_future(self.call(batch, ctx)), deadline)
        seen = 0
        while outcome.name == "ok" and seen < len(ctx.tasks):  # waitUntil tasks may add more
            task = ctx.tasks[seen]
            seen += 1
            outcome = await self._await(task, deadline)
        if outcome.name != "ok":
            for t in ctx.tasks:
                t.cancel()
        return outcome

    async def _await(self, fut: asyncio.Future[Any], deadline: float) -> Outcome:
        abort = asyncio.ensure_future(self.abort.wait())
        try:
            done, _ = await asyncio.wait(
                {fut, abort},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            abort.cancel()
        if fut not in done:
            fut.cancel()
            with contextlib.suppress(BaseException):
                await fut
            if self.abort.is_set():
                return Outcome(ABORTED)
            log.error(
                "queue %s: handler of worker %s exceeded its %.0f s wall-clock limit",
                self.queue,
                self.worker,
                self.timeout_s,
                extra={"event": "handler_timeout", "worker": self.worker, "queue": self.queue},
            )
            return Outcome("exceededWallTime", f"exceeded its {self.timeout_s:.0f} s limit")
        if fut.cancelled():
            return Outcome("canceled", "canceled")
        exc = fut.exception()
        if exc is not None:
            log.error(
                "queue %s: handler of worker %s raised",
                self.queue,
                self.worker,
                exc_info=exc,
                extra={"event": "handler_failed", "worker": self.worker, "queue": self.queue},
            )
            return Outcome("exception", summary(exc))
        return OUTCOME_OK


def summary(exc: BaseException) -> str:
    """One line for the batch's outcome: ``ValueError: bad (at app.py:12 in queue)``, the
    frame where it was raised."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        f = frames[-1]
        text += f" (at {f.filename}:{f.lineno} in {f.name})"
    return text[:1000]
