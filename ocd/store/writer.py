"""Group commit: one task owns the write connection and runs everything pending in one
transaction, commits, then resolves each caller's future.

Callers never wait for each other's round trips: many sends arriving together share one
INSERT statement and one fsync. A failing group is retried one operation at a time so that
one bad operation cannot fail its neighbours.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import aiosqlite

from ocd.errors import StoreError
from ocd.store import sql
from ocd.store.base import NewMessage, QueueRecord

MAX_GROUP = 4000  # operations per group commit; bounds one transaction's size
IN_CHUNK = 500  # parameters per "seq IN (...)" statement


class Tx:
    """What one transaction changed, applied to in-memory state only after COMMIT."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        self.delta: dict[int, list[int]] = {}  # queue key -> [count, bytes]
        self.oldest_dirty: set[int] = set()
        self.oldest_new: dict[int, int] = {}
        self.oldest_known: dict[int, int] = {}
        self.notify: set[int] = set()

    def added(self, key: int, count: int, size: int, min_sent_ms: int) -> None:
        d = self.delta.setdefault(key, [0, 0])
        d[0] += count
        d[1] += size
        prev = self.oldest_new.get(key)
        self.oldest_new[key] = min_sent_ms if prev is None else min(prev, min_sent_ms)
        self.notify.add(key)

    def removed(self, key: int, count: int, size: int) -> None:
        d = self.delta.setdefault(key, [0, 0])
        d[0] -= count
        d[1] -= size
        self.oldest_dirty.add(key)


class Op:
    # Must this operation be on disk (fsync) before its caller hears back? Sends and queue
    # changes must. Claims, acks and retries need not: after a power loss (not a crash: the
    # OS still has them) losing one only means a redelivery, which at-least-once allows, and
    # the next durable commit syncs them anyway.
    durable = True

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.result: Any = None

    async def apply(self, tx: Tx) -> None:
        raise NotImplementedError


class Enqueue(Op):
    def __init__(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> None:
        super().__init__()
        self.queue = queue
        self.messages = messages

    def rows(self) -> Iterable[tuple[Any, ...]]:
        key = self.queue.key
        for m in self.messages:
            yield (key, m.id, m.content_type, m.body, len(m.body), m.sent_ms, m.visible_ms)

    def account(self, tx: Tx) -> None:
        tx.added(
            self.queue.key,
            len(self.messages),
            sum(len(m.body) for m in self.messages),
            min(m.sent_ms for m in self.messages),
        )

    async def apply(self, tx: Tx) -> None:
        await tx.conn.executemany(sql.INSERT_MESSAGE, self.rows())
        self.account(tx)


class Call(Op):
    """Any other write: a coroutine function run inside the group's transaction."""

    def __init__(self, fn: Any, *args: Any, durable: bool = True) -> None:
        super().__init__()
        self.fn = fn
        self.args = args
        self.durable = durable

    async def apply(self, tx: Tx) -> None:
        self.result = await self.fn(tx, *self.args)


def chunks(seq: Sequence[int]) -> Iterable[Sequence[int]]:
    for i in range(0, len(seq), IN_CHUNK):
        yield seq[i : i + IN_CHUNK]


def marks(n: int) -> str:
    return ",".join("?" * n)


async def fetch_all(conn: aiosqlite.Connection, query: str, params: Any = ()) -> list[Any]:
    return list(await conn.execute_fetchall(query, params))


async def fetch_one(conn: aiosqlite.Connection, query: str, params: Any = ()) -> Any:
    """The first row; one round trip to the connection's thread, not three."""
    rows = await fetch_all(conn, query, params)
    return rows[0] if rows else None


class Writer:
    def __init__(
        self,
        conn: aiosqlite.Connection,
        durability: str,
        before_commit: Callable[[Tx], Awaitable[None]],
        after_commit: Callable[[Tx, list[Op]], None],
    ) -> None:
        self._conn = conn
        self._durability = durability
        self._sync = "FULL" if durability == "full" else "NORMAL"
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._pending: list[Op] = []
        self._wake = asyncio.Event()
        self._closing = False
        self.commits = 0
        self._task = asyncio.create_task(self._write_loop(), name="ocd-store-writer")

    async def submit(self, op: Op) -> Any:
        if self._closing:
            raise StoreError("the store is closed")
        if self._task.done():
            raise StoreError("the store's writer has stopped")
        self._pending.append(op)
        self._wake.set()
        # A caller that is cancelled after submitting must not undo the write: the writer
        # still commits it, and shielding keeps the future from being cancelled with it.
        return await asyncio.shield(op.future)

    async def close(self) -> None:
        """Commit what is pending, then stop."""
        self._closing = True
        self._wake.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                ops = self._pending[:MAX_GROUP]
                del self._pending[:MAX_GROUP]
                await self._commit_group(ops)
            if self._closing:
                return

    async def _commit_group(self, ops: list[Op]) -> None:
        try:
            tx = await self._run(ops)
        except sqlite3.Error as e:
            if len(ops) == 1:
                _fail(ops[0], e)
                return
            # Isolate the failure: one bad operation must not fail its neighbours.
            for op in ops:
                try:
                    tx = await self._run([op])
                except sqlite3.Error as e1:
                    _fail(op, e1)
                else:
                    self._done(tx, [op])
            return
        self._done(tx, ops)

    def _done(self, tx: Tx, ops: list[Op]) -> None:
        self.commits += 1
        self._after_commit(tx, ops)
        for op in ops:
            if not op.future.done():
                op.future.set_result(op.result)

    async def _run(self, ops: list[Op]) -> Tx:
        conn = self._conn
        tx = Tx(conn)
        if self._durability == "full":
            sync = "FULL" if any(op.durable for op in ops) else "NORMAL"
            if sync != self._sync:
                await conn.execute(f"PRAGMA synchronous={sync}")
                self._sync = sync
        await conn.execute("BEGIN IMMEDIATE")
        try:
            enqueues = [op for op in ops if isinstance(op, Enqueue)]
            if enqueues:
                # All pending sends in one statement: the point of group commit.
                await conn.executemany(
                    sql.INSERT_MESSAGE, (row for e in enqueues for row in e.rows())
                )
                for e in enqueues:
                    e.account(tx)
            for op in ops:
                if not isinstance(op, Enqueue):
                    await op.apply(tx)
            await self._before_commit(tx)
            await conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await conn.execute("ROLLBACK")
            raise
        return tx


def _fail(op: Op, e: sqlite3.Error) -> None:
    if not op.future.done():
        op.future.set_exception(StoreError(f"database write failed: {e}"))
