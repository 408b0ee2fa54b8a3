"""Bulk moves: bounded background tasks that redrive (a dead-letter queue back to a source,
attempts reset) or delete selected messages, or all matching a filter.

A task runs in chunks of ``MOVE_CHUNK`` with its upper bound fixed at start (the backlog
then, and nothing sent after it), so a message that fails again and comes back is never
taken twice; it is kept in the store, so it survives a restart (``resume_moves``) and a
node that dies (another adopts it), reports progress and can be cancelled between chunks.
``ocd.admin.Admin`` owns one ``Moves``; every surface starts moves through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ocd.clock import Clock
from ocd.errors import MoveTaskRunning, QueueNotFound, StoreConflict, StoreError
from ocd.store import (
    BrowseCursor,
    BrowseQuery,
    Browsing,
    CatalogueReads,
    Messages,
    MoveTaskRow,
    MoveTasks,
    QueueRecord,
)

log = logging.getLogger(__name__)

MOVE_CHUNK = 500  # messages per transaction of a bulk move: sends and acks go between them
KEPT_TASKS = 50  # finished tasks remembered for their progress pages
MOVE_ADOPT_S = 5.0  # how often a node looks for active move tasks of nodes that died


class MovesStore(CatalogueReads, Messages, Browsing, MoveTasks, Protocol):
    """What bulk moves use of the store: the task rows and their chunks, a browse to bound
    and page through the source, its backlog, and its queues by id."""


class Moves:
    """This node's bulk move tasks: the running ones and the lately finished."""

    def __init__(
        self,
        store: MovesStore,
        clock: Clock,
        current: Callable[[QueueRecord], Awaitable[QueueRecord]],
    ) -> None:
        self.store = store
        self.clock = clock
        self.current = current  # the queue as the catalogue has it now (Admin.current)
        self._tasks: dict[str, MoveTask] = {}

    def tasks(self, account: str) -> list[MoveTask]:
        """The account's tasks, running and lately finished, newest first."""
        found = [t for t in self._tasks.values() if t.account == account]
        return sorted(found, key=lambda t: (-t.started_ms, t.id))

    def task(self, account: str, task_id: str) -> MoveTask | None:
        t = self._tasks.get(task_id)
        return t if t is not None and t.account == account else None

    def _remember(self, task: MoveTask) -> None:
        self._tasks[task.id] = task
        done = sorted(
            (t for t in self._tasks.values() if t.finished_ms is not None),
            key=lambda t: t.started_ms,
        )
        for old in done[:-KEPT_TASKS]:
            self._tasks.pop(old.id, None)

    async def start_move(
        self,
        queue: QueueRecord,
        destination: QueueRecord | None,
        seqs: Sequence[int] | None = None,
        query: BrowseQuery | None = None,
        rate: int | None = None,
        dead_lettered_only: bool = False,
    ) -> MoveTask:
        """Redrive (``destination`` given) or delete (None) the messages ``seqs`` of
        ``queue``, or every message matching ``query``'s filters, as a background task
        kept in the store (so that it survives a restart: :meth:`resume_moves`). Its bound
        is fixed now: at most the queue's backlog at this moment, and only messages sent up
        to the newest one now; with ``dead_lettered_only`` (a redrive of a dead-letter
        queue) also only messages there now, not ones dead-lettered later. At most
        ``rate`` messages a second. ``MoveTaskRunning`` if the queue has a redrive
        running already."""
        current = await self.current(queue)
        if destination is not None:
            destination = await self.current(destination)
        backlog = await self.store.backlog(current)
        now = self.clock()
        newest = await self.store.browse(current, now, BrowseQuery(limit=1, newest_first=True))
        bound = BrowseCursor(newest[0].sent_ms, newest[0].seq) if newest else None
        total = min(len(set(seqs)), backlog.count) if seqs is not None else backlog.count
        spec: dict[str, object] = {}
        if seqs is not None:
            spec["seqs"] = sorted(set(seqs))
        else:
            spec["filter"] = _filter_json(query or BrowseQuery())
        if dead_lettered_only:
            spec["dead_lettered_by_ms"] = now
        row = MoveTaskRow(
            task_id=secrets.token_hex(8),
            account=current.account,
            source_id=current.queue_id,
            source=current.name,
            destination_id=destination.queue_id if destination else None,
            destination=destination.name if destination else None,
            total=total,
            started_ms=now,
            rate=rate,
            bound=bound,
            spec=json.dumps(spec, separators=(",", ":")),
        )
        try:
            await self.store.create_move_task(row, now)
        except StoreConflict:
            raise MoveTaskRunning(current.name) from None
        task = MoveTask.of(row)
        self._remember(task)
        self._launch(task, current, destination, row)
        log.info(
            "%s of %s started: up to %d message(s)",
            task.action,
            current.name,
            total,
            extra={"event": "move_started", "task": task.id, "queue": current.name,
                   "destination": task.destination, "total": total},
        )  # fmt: skip
        return task

    async def cancel_move(self, task: MoveTask) -> MoveTask:
        """Ask the task to stop after its current chunk (on whichever node runs it); what
        moved stays moved. A finished task is left as it is."""
        if task.finished_ms is not None:
            return task
        task.cancel()
        row = await self.store.set_move_task_state(task.id, "cancelling", self.clock())
        if row is not None:
            task.update(row)
        return task

    async def resume_moves(self) -> list[MoveTask]:
        """At start: remember the tasks the store keeps, and go on with the active ones no
        live node runs (this node's predecessor's, after a restart or a crash). A task whose
        queue was deleted meanwhile is failed, saying so. Returns the tasks resumed."""
        for row in await self.store.move_tasks():
            if row.task_id not in self._tasks:
                self._tasks[row.task_id] = MoveTask.of(row)
        return await self.adopt_moves()

    async def adopt_loop(self, every_s: float = MOVE_ADOPT_S) -> None:
        """Go on with active tasks whose node died (shared databases: once its heartbeat
        has lapsed and a node has reaped it), every ``every_s``; on a store where no such
        task appears while this node runs (SQLite), nothing."""
        if not self.store.orphans_appear:
            return
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(StoreError):
                await self.adopt_moves()

    async def adopt_moves(self) -> list[MoveTask]:
        """Take over and run the active tasks no live node runs; returns them."""
        resumed: list[MoveTask] = []
        for row in await self.store.adopt_move_tasks():
            task = MoveTask.of(row)
            self._tasks[task.id] = task
            source = await self.store.lookup_by_id(row.source_id)
            dest = (
                await self.store.lookup_by_id(row.destination_id)
                if row.destination_id is not None
                else None
            )
            if source is None or (row.destination_id is not None and dest is None):
                gone = row.source if source is None else row.destination
                await self._finish(task, "failed", f"Queue not found: {gone}")
                continue
            log.info(
                "%s of %s resumed (the node running it stopped): %d of at most %d message(s) done",
                task.action, task.queue, task.done, task.total,
                extra={"event": "move_resumed", "task": task.id, "done": task.done},
            )  # fmt: skip
            self._launch(task, source, dest, row)
            resumed.append(task)
        return resumed

    async def stop_moves(self) -> None:
        """Stop the tasks this node runs, as they are: the store keeps them active, and
        :meth:`resume_moves` goes on with them at the next start (on this node or
        another)."""
        runners = [t._runner for t in self._tasks.values() if t._runner is not None]
        for r in runners:
            r.cancel()
        for r in runners:
            with contextlib.suppress(BaseException):
                await r

    def _launch(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        row: MoveTaskRow,
    ) -> None:
        work = self._run_move(task, queue, destination, row)
        task._runner = asyncio.create_task(work, name=f"ocd-move-{task.id}")

    async def _finish(self, task: MoveTask, state: str, error: str | None = None) -> None:
        task.state, task.error = state, error
        task.finished_ms = self.clock()
        row = await self.store.set_move_task_state(task.id, state, task.finished_ms, error)
        if row is not None:
            task.update(row)
        log.info(
            "%s of %s %s: %d of at most %d message(s)",
            task.action,
            task.queue,
            task.state,
            task.done,
            task.total,
            extra={"event": "move_finished", "task": task.id, "state": task.state,
                   "done": task.done, "total": task.total},
        )  # fmt: skip

    async def _run_move(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        row: MoveTaskRow,
    ) -> None:
        spec = json.loads(row.spec)
        pace = _Pace(row.rate, task.done)
        try:
            if "seqs" in spec:
                after = row.cursor.seq if row.cursor is not None else 0
                todo = [int(s) for s in spec["seqs"] if int(s) > after]
                step = pace.chunk()
                i = 0
                while i < len(todo) and not task.cancel_requested and task.done < task.total:
                    chunk = todo[i : i + step]
                    i += len(chunk)
                    await self._move_chunk(
                        task, queue, destination, chunk, BrowseCursor(0, chunk[-1])
                    )
                    await pace.wait(task.done)
            elif row.bound is not None:
                query = _filter_of(spec.get("filter") or {})
                await self._move_matching(task, queue, destination, query, row, spec, pace)
            state = "cancelled" if task.cancel_requested else "completed"
            await self._finish(task, state)
        except (StoreError, QueueNotFound) as e:
            with contextlib.suppress(StoreError):
                await self._finish(task, "failed", str(e))

    async def _move_matching(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        query: BrowseQuery,
        row: MoveTaskRow,
        spec: dict[str, Any],
        pace: _Pace,
    ) -> None:
        assert row.bound is not None
        bound = tuple(row.bound)
        cursor: BrowseCursor | None = row.cursor
        by_ms = spec.get("dead_lettered_by_ms")
        while not task.cancel_requested and task.done < task.total:
            page = replace(
                query, limit=pace.chunk(), newest_first=False, after=cursor, body_bytes=0
            )
            rows = await self.store.browse(queue, self.clock(), page)
            if not rows:
                return
            cursor = BrowseCursor(rows[-1].sent_ms, rows[-1].seq)
            inside = [
                r.seq
                for r in rows
                if (r.sent_ms, r.seq) <= bound
                and not r.leased
                and (by_ms is None or r.visible_ms <= by_ms)
            ]
            picked = inside[: task.total - task.done]
            await self._move_chunk(task, queue, destination, picked, cursor)
            await pace.wait(task.done)
            if tuple(cursor) >= bound:
                return

    async def _move_chunk(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        seqs: Sequence[int],
        cursor: BrowseCursor,
    ) -> None:
        """One chunk, its progress recorded with it (a crash keeps both or neither)."""
        row = await self.store.move_task_chunk(
            task.id, queue, destination, seqs, cursor, self.clock()
        )
        task.chunks += 1
        if row is not None:
            task.update(row)
            if row.state == "cancelling":  # asked for on another node, or before a restart
                task.cancel_requested = True
        await asyncio.sleep(0)  # let sends and acks in between chunks


class _Pace:
    """Chunks no bigger than a second's worth at ``rate``, and waits that hold the task to
    ``rate`` messages a second on average (no limit without one)."""

    def __init__(self, rate: int | None, done: int) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.base = done

    def chunk(self) -> int:
        return MOVE_CHUNK if self.rate is None else max(1, min(MOVE_CHUNK, self.rate))

    async def wait(self, done: int) -> None:
        if self.rate is None:
            return
        due = self.start + (done - self.base) / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def _filter_json(q: BrowseQuery) -> dict[str, object]:
    return {
        "state": q.state,
        "min_attempts": q.min_attempts,
        "sent_from_ms": q.sent_from_ms,
        "sent_to_ms": q.sent_to_ms,
    }


def _filter_of(f: dict[str, Any]) -> BrowseQuery:
    return BrowseQuery(
        state=str(f.get("state", "any")),
        min_attempts=int(f.get("min_attempts", 0)),
        sent_from_ms=f.get("sent_from_ms"),
        sent_to_ms=f.get("sent_to_ms"),
    )


@dataclass(eq=False)
class MoveTask:
    """A bulk redrive or delete running in the background (see :meth:`Admin.start_move`);
    the store keeps it too (``MoveTaskRow``), so that it survives a restart."""

    id: str
    account: str
    queue: str
    destination: str | None  # None: a delete
    total: int  # the upper bound, fixed at start
    started_ms: int
    done: int = 0
    chunks: int = 0
    state: str = "running"  # running -> cancelling -> completed | cancelled | failed
    error: str | None = None
    finished_ms: int | None = None
    cancel_requested: bool = False
    rate: int | None = None  # messages per second at most
    queue_id: str = ""
    destination_id: str | None = None
    _runner: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, row: MoveTaskRow) -> MoveTask:
        return cls(
            id=row.task_id,
            account=row.account,
            queue=row.source,
            destination=row.destination,
            total=row.total,
            started_ms=row.started_ms,
            done=row.done,
            state=row.state,
            error=row.error,
            finished_ms=row.finished_ms,
            cancel_requested=row.state == "cancelling",
            rate=row.rate,
            queue_id=row.source_id,
            destination_id=row.destination_id,
        )

    def update(self, row: MoveTaskRow) -> None:
        self.done, self.state, self.error = row.done, row.state, row.error
        self.finished_ms = row.finished_ms

    @property
    def action(self) -> str:
        return "delete" if self.destination is None else "redrive"

    def cancel(self) -> None:
        """Stop after the chunk in progress; what moved stays moved."""
        self.cancel_requested = True
        if self.state == "running":
            self.state = "cancelling"

    def json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "action": self.action,
            "queue": self.queue,
            "destination": self.destination,
            "total": self.total,
            "done": self.done,
            "state": self.state,
            "error": self.error,
            "rate": self.rate,
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
        }
