"""What runs inside the SQLite writer's transaction: the transaction's bookkeeping (``Tx``),
the operations callers hand the writer (``Call``; sends are ``layout.Enqueue``), and the
small helpers they run statements with."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, cast

import aiosqlite

IN_CHUNK = 500  # parameters per "seq IN (...)" statement

# Python's sqlite3 binds an exact int, float or str as it is, but looks any other value up
# in its adapter registry first, and a miss costs attribute lookups that raise and clear an
# AttributeError: about half a microsecond a value, for every body (bytes), absent attrs
# (None) and flag (bool), more than binding the rest of a message's row. Adapters that give
# the value back as it is (a bool as its int, as sqlite3 binds it anyway) make each a
# dictionary hit and a call of a C function (a Python one would cost a frame a value);
# nothing stored changes. Process-wide, like the registry itself. The hot rows pass their
# flags as ints, which need no adapter at all.
sqlite3.register_adapter(bytes, bytes)  # bytes(b) is b
sqlite3.register_adapter(type(None), cast(Callable[[None], None], {}.get))  # None, as NULL
sqlite3.register_adapter(bool, int)


class Run(NamedTuple):
    """One group's run of a FIFO claim: its first and last sequence numbers, how many
    messages it took, and the highest of their seqs."""

    lo: int
    hi: int
    n: int
    top: int


class Delivered:
    """What the writer read of the FIFO messages it leased: seq -> (group, fseq, size, the
    run of its group the claim took).

    A message row is never updated and a seq is never given twice (a queue that gets a
    deleted queue's key keeps its cursor row), so these stay true for as long as the seq
    names a message: an ack finds the message's order row with them instead of reading its
    row, which lies on a page of its own when groups interleave, and a run acked whole
    goes in one range of the group's order rows. Learnt only from
    transactions that committed (a rolled-back send gives its seqs again), dropped when
    acked, bounded (all forgotten past ``MOST``), empty after a restart, where an ack reads
    the rows as before."""

    MOST = 50_000

    def __init__(self) -> None:
        self.of: dict[int, tuple[str, int, int, Run]] = {}

    def learn(self, facts: dict[int, tuple[str, int, int, Run]]) -> None:
        if len(self.of) + len(facts) > self.MOST:
            self.of.clear()
        self.of.update(facts)


class Tx:
    """What one transaction changed, applied to in-memory state only after COMMIT."""

    def __init__(self, conn: sqlite3.Connection, delivered: Delivered | None = None) -> None:
        self.conn = conn
        self.delivered = Delivered() if delivered is None else delivered
        self.learnt: dict[int, tuple[str, int, int, Run]] = {}  # ``delivered``'s, once committed
        self.delta: dict[int, list[int]] = {}  # queue key -> [count, bytes]
        self.oldest_dirty: set[int] = set()
        self.oldest_new: dict[int, int] = {}
        self.oldest_known: dict[int, int] = {}
        self.notify: set[int] = set()
        self.on_loop = False  # committed on the event loop's thread, not the writer's
        # Whether it changed any row (``total_changes``): a commit that changed none (a sweep
        # that found nothing to delete) added nothing to the WAL for a checkpoint to copy.
        self.wrote = True

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
    # How many rows the operation touches at most, if that is known and small: only groups
    # of such operations may commit inline on the loop.
    most_rows: int | None = None
    # Does it store new messages? While the disk is full these are refused before they
    # are tried (``Writer(refuse=...)``); everything else (claims, acks) still runs.
    grows = False
    # Is it one of the small writes a daemon makes while idle (the clock's mark, every
    # MARK_EVERY_S)? A commit of only such operations adds a page to the WAL and wakes the
    # checkpoint loop only every ``QUIET_COMMITS`` (``ocd.store.sqlite.core``), not each
    # time: each round is a hop to two threads and a sync of the commit mark.
    quiet = False

    future: asyncio.Future[Any]  # made by Writer.submit

    def __init__(self) -> None:
        self.result: Any = None

    def apply(self, tx: Tx) -> None:
        """Runs on the writer's thread, inside the group's transaction."""
        raise NotImplementedError


class Call(Op):
    """Any other write: ``fn(tx, *args)`` run inside the group's transaction."""

    def __init__(
        self,
        fn: Any,
        *args: Any,
        durable: bool = True,
        most_rows: int | None = None,
        grows: bool = False,
        quiet: bool = False,
    ) -> None:
        super().__init__()
        self.fn = fn
        self.args = args
        self.durable = durable
        self.most_rows = most_rows
        self.grows = grows
        self.quiet = quiet

    def apply(self, tx: Tx) -> None:
        self.result = self.fn(tx, *self.args)


def chunks(seq: Sequence[int]) -> Iterable[Sequence[int]]:
    for i in range(0, len(seq), IN_CHUNK):
        yield seq[i : i + IN_CHUNK]


def marks(n: int) -> str:
    return ",".join("?" * n)


def fetch_all(conn: sqlite3.Connection, query: str, params: Any = ()) -> list[Any]:
    return conn.execute(query, params).fetchall()


def fetch_one(conn: sqlite3.Connection, query: str, params: Any = ()) -> Any:
    return conn.execute(query, params).fetchone()


async def read_all(conn: aiosqlite.Connection, query: str, params: Any = ()) -> list[Any]:
    """A read on the aiosqlite read connection: one round trip to its thread."""
    return list(await conn.execute_fetchall(query, params))


async def read_one(conn: aiosqlite.Connection, query: str, params: Any = ()) -> Any:
    rows = await read_all(conn, query, params)
    return rows[0] if rows else None
