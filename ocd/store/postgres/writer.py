"""Group commit on PostgreSQL: one task owns a connection and commits every send that is
pending in one transaction (one multi-row INSERT through ``unnest``), then resolves each
caller's future.

While a transaction is in flight, new sends queue up and form the next group, so under load
a commit is shared by as many sends as arrived during the previous one; at light load a send
waits only for its own commit. A failing group is retried one send at a time, so that one
bad send (a queue deleted on another node) cannot fail its neighbours. Losing the connection
fails the group with ``StoreUnavailable``; the next group reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from ocd.errors import OcdError, QueueNotFound, StoreConflict, StoreError, StoreUnavailable
from ocd.store.postgres import fifo, sql
from ocd.store.postgres.errors import is_driver_error, translate
from ocd.store.values import Backlog, FifoSent, NewMessage, QueueRecord

log = logging.getLogger(__name__)

MAX_GROUP_ROWS = 5000  # messages per transaction; bounds one commit's size
SHARDS = 8  # rows of ocd_counts per queue


class Send:
    __slots__ = ("future", "messages", "queue", "sent")

    def __init__(
        self, queue: QueueRecord, messages: Sequence[NewMessage], future: asyncio.Future[Any]
    ) -> None:
        self.queue = queue
        self.messages = messages
        self.future = future
        self.sent: list[FifoSent] | None = None  # a FIFO send's answers, once committed


class GroupWriter:
    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        where: str,
        after_commit: Callable[[dict[int, Backlog]], None],
    ) -> None:
        self._connect = connect
        self._where = where
        self._after_commit = after_commit
        self._pending: list[Send] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self.commits = 0
        self.on_commit: Callable[[int, bool], None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name="ocd-store-pg-writer"
        )

    def background(self) -> list[asyncio.Task[None]]:
        return [self._task] if self._task is not None else []

    def submit(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> asyncio.Future[Any]:
        if self._closing or self._task is None or self._task.done():
            raise StoreError("the store is closed", self._where, "send")
        fut = asyncio.get_running_loop().create_future()
        self._pending.append(Send(queue, messages, fut))
        self._wake.set()
        return fut

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close(timeout=2)
            self._conn = None

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                group = self._take()
                await self._commit_group(group)
            if self._closing:
                return

    def _take(self) -> list[Send]:
        rows = 0
        n = 0
        for s in self._pending:
            if n and rows + len(s.messages) > MAX_GROUP_ROWS:
                break
            rows += len(s.messages)
            n += 1
        group = self._pending[:n]
        del self._pending[:n]
        return group

    async def _commit_group(self, group: list[Send]) -> None:
        try:
            backlogs = await self._commit(group)
        except Exception as e:
            if len(group) == 1 or isinstance(e, StoreUnavailable):
                for s in group:
                    _fail(s, e)
                return
            for s in group:  # isolate the one that failed
                try:
                    backlogs = await self._commit([s])
                except Exception as e1:
                    _fail(s, e1)
                else:
                    self._done([s], backlogs)
            return
        self._done(group, backlogs)

    async def _commit(self, group: list[Send]) -> dict[int, Backlog]:
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = None
                self._conn = await self._connect()
            conn = self._conn
            cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [])
            keys: list[int] = []
            fifo_sends: dict[int, list[Send]] = {}
            for s in group:
                key = s.queue.key
                if key not in keys:
                    keys.append(key)
                if s.queue.fifo:
                    fifo_sends.setdefault(key, []).append(s)
                    continue
                for m in s.messages:
                    cols[0].append(key)
                    cols[1].append(m.id)
                    cols[2].append(m.content_type)
                    cols[3].append(m.body)
                    cols[4].append(len(m.body))
                    cols[5].append(m.sent_ms)
                    cols[6].append(m.visible_ms)
                    cols[7].append(m.attrs)
            if not fifo_sends and all(s.messages for s in group):
                # every queue has rows in the statement, so each gets its backlog row
                rows = await conn.fetch(sql.ENQUEUE_ALONE, *cols, random.randrange(SHARDS))
                return {r[0]: Backlog(r[1], r[2], r[3] or 0) for r in rows}
            async with conn.transaction():
                # FIFO sends share the group's commit, one queue at a time under its lock
                # (in key order, as every FIFO transaction takes them), before the standard
                # queues' tails: a FIFO settle that dead-letters into a standard queue takes
                # its lock, then that tail, in this order too.
                for key in sorted(fifo_sends):
                    await fifo.lock(conn, key)
                    await self._fifo(conn, fifo_sends[key])
                if cols[0]:
                    await conn.execute(sql.ENQUEUE, *cols, random.randrange(SHARDS))
                rows = await conn.fetch(sql.BACKLOGS_AND_NOTIFY, keys)
        except OcdError:
            raise
        except Exception as e:
            if not is_driver_error(e):
                raise
            err = translate(e, self._where, "send")
            if isinstance(err, StoreUnavailable) and self._conn is not None:
                conn, self._conn = self._conn, None
                conn.terminate()
            raise err from e
        return {r[0]: Backlog(r[1], r[2], r[3] or 0) for r in rows}

    @staticmethod
    async def _fifo(conn: asyncpg.Connection, sends: list[Send]) -> None:
        """The FIFO sends of one queue as one: deduplicated among themselves in arrival
        order; each keeps its own answers (``Send.sent``)."""
        messages = [m for s in sends for m in s.messages]
        answers, _ = await fifo.enqueue(conn, sends[0].queue, messages)
        at = 0
        for s in sends:
            s.sent = answers[at : at + len(s.messages)]
            at += len(s.messages)

    def _done(self, group: list[Send], backlogs: dict[int, Backlog]) -> None:
        self.commits += 1
        if self.on_commit is not None:
            self.on_commit(len(group), False)
        self._after_commit(backlogs)
        for s in group:
            if not s.future.done():
                backlog = backlogs.get(s.queue.key, Backlog(0, 0, 0))
                s.future.set_result(backlog if s.sent is None else (backlog, s.sent))


def _fail(s: Send, e: BaseException) -> None:
    if s.future.done():
        return
    if isinstance(e, StoreConflict) and e.what == "foreign_key":
        s.future.set_exception(QueueNotFound(s.queue.name))  # deleted on another node
    elif isinstance(e, OcdError):
        s.future.set_exception(e)
    else:
        log.error("a send failed", exc_info=e, extra={"event": "store_op_failed"})
        s.future.set_exception(StoreError(f"send failed: {e!r}"))
