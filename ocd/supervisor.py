"""The daemon's background tasks, supervised: each is named and strongly referenced, and the
first one to die records why (``failure``) and sets ``failed``, so that the daemon stops
loudly (exit 1; systemd restarts it) instead of running half-alive. ``watch_store`` is the
task that watches the store's own loops the same way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from ocd.errors import StoreLoopDied
from ocd.store import Lifecycle

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()

    def start(self, name: str, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro, name=name)
        self.tasks[name] = task
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.failure is None:
            self.failure = exc
            log.critical(
                "background task %s died; stopping ocd",
                task.get_name(),
                exc_info=exc,
                extra={"event": "task_died", "task": task.get_name()},
            )
            self.failed.set()

    async def stop(self) -> None:
        """Cancel every task and wait for each to end."""
        for task in self.tasks.values():
            task.cancel()
        for task in self.tasks.values():
            with contextlib.suppress(BaseException):
                await task
        self.tasks.clear()


async def watch_store(store: Lifecycle) -> None:
    """The store's own loops run until it closes (after this task is cancelled): one that
    ends before is dead, and the daemon stops rather than serve half-alive, every send
    failing."""
    tasks = store.background()
    if not tasks:
        return
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    task = done.pop()
    why = "was cancelled" if task.cancelled() else "stopped"
    exc = None if task.cancelled() else task.exception()
    raise StoreLoopDied(
        f"the store's loop {task.get_name()} {why}" + (f": {exc!r}" if exc else "")
    ) from exc
