"""Group commit: one task owns the write connection and runs everything pending in one
transaction, commits, then resolves each caller's future.

Many sends arriving together share one fsync and a few INSERT statements (``INSERT_ROWS``
rows each). A group that will be fsynced first lets the loop run while each of its turns
brings more operations (``_gather``), so that requests the loop has yet to parse join it.
A failing group is retried one operation at a time so that one bad operation cannot fail
its neighbours.

The write connection lives on one thread of its own, and a whole transaction (BEGIN, every
operation, COMMIT) runs there as a single call. aiosqlite would make each statement a round
trip through the event loop; under HTTP load each round trip waits behind the loop's other
work, which stretched a commit to many milliseconds and every send with it. Operations are
therefore plain functions of a ``sqlite3`` connection; the read connection stays aiosqlite.

A small group is committed on the event loop's own thread instead. Handing a group to the
thread and back costs two wake-ups and two GIL hand-overs; under HTTP load the loop holds the
GIL nearly all the time, so each hand-over waits for it and a commit takes many times its
own length (figures in docs/performance.md). The loop then waits out
the fsync itself, which is cheap only on a fast disk: when more than half of the last
``INLINE_WINDOW`` inline commits kept the loop asleep (waiting for the disk, not for a CPU:
``ocd.store.sqlite.asleep``) longer than ``SLOW_INLINE_S``, every group goes to the thread for
``THREAD_AFTER_SLOW_S``, and a slow disk stalls the loop for about nine commits in that time.
A count, not an average: on a shared host a single fsync now and then takes tens of
milliseconds, and one such fsync must not send the next groups through the thread, where
single pushes are slower. Large groups
(a purge, a retention sweep, thousands of rows) always go to the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ocd.errors import OcdError, StoreError, StoreFull
from ocd.store.sqlite import sql
from ocd.store.sqlite.asleep import Asleep
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.layout import Enqueue, insert, send_rows
from ocd.store.sqlite.mark import MarkFile
from ocd.store.sqlite.ops import Delivered, Op, Tx

log = logging.getLogger(__name__)

MAX_GROUP = 4000  # operations per group commit; bounds one transaction's size
INLINE_ROWS = 1000  # a group touching at most this many rows may commit on the loop
INLINE_WINDOW = 16  # when more than half of the last this many inline commits ...
SLOW_INLINE_S = 0.004  # ... slept longer than this, ...
THREAD_AFTER_SLOW_S = 10.0  # ... every group goes to the writer's thread for this long
GATHER_S = 0.002  # a group that will be fsynced waits for more operations at most this long
GATHER_ROWS = INLINE_ROWS // 2  # ... and stops waiting once it holds this many rows
# Prepared statements the write connection keeps (sqlite3's default: 128). Multi-row
# statements differ by their row count (a FIFO claim's group_runs(n), a send's rows, a
# settle's groups), and preparing one again costs far more than running it: group_runs of
# 100 groups takes 2.1 ms to prepare and run against 0.14 ms cached.
STATEMENTS_CACHED = 1024


class Writer:
    _loop: asyncio.AbstractEventLoop  # set by start()

    def __init__(
        self,
        path: Path,
        durability: str,
        before_commit: Callable[[Tx], None],
        after_commit: Callable[[Tx, list[Op]], None],
        monotonic: Callable[[], float] = time.monotonic,
        asleep: Callable[[], float] | None = None,
        refuse: Callable[[], StoreError | None] = lambda: None,
        on_error: Callable[[StoreError], None] = lambda e: None,
    ) -> None:
        self._path = path
        self._wal = Path(f"{path}-wal")
        self._refuse = refuse  # the error for operations that grow the database, if any now
        self._on_error = on_error  # told of every store error a write met
        self.wal_limit = 0  # past this size (0: never) the writer checkpoints between groups
        self._checkpoint_due = False
        self._truncate = False
        self.delivered = Delivered()  # FIFO messages' facts, learnt from committed claims
        self._monotonic = monotonic
        self._asleep = Asleep() if asleep is None else asleep
        self._durability = durability
        self._sync = "FULL" if durability == "full" else "NORMAL"
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._pending: list[Op] = []
        self._checkpoints: list[asyncio.Future[None]] = []  # callers of checkpoint()
        self._wake = asyncio.Event()
        self._closing = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="ocd-writer")
        self._conn: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._threaded_until = 0.0  # monotonic time until which no group commits inline
        self._slow: deque[bool] = deque(maxlen=INLINE_WINDOW)  # per inline commit: slow?
        self.commits = 0
        # Commits that held a durable operation, counted in the database itself (a row of
        # sqlite_sequence) once count_commits() has been called, and then copied to the
        # high-water mark after each such commit is on disk (durability "full").
        self.durable_commits = 0
        self._mark: MarkFile | None = None
        self._mark_failed = False  # logged once

    def count_commits(self, commits: int, mark: MarkFile) -> None:
        """From now on count durable commits from ``commits`` and advance ``mark``."""
        self.durable_commits = commits
        self._mark = mark

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(connection, *args)`` on the writer's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._with_conn, fn, args)

    def _with_conn(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        assert self._conn is not None
        return fn(self._conn, *args)

    async def connect(self, pragmas: Sequence[str]) -> None:
        def connect() -> None:
            self._conn = sqlite3.connect(
                self._path,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=STATEMENTS_CACHED,
            )
            for pragma in pragmas:
                self._conn.execute(pragma)

        await asyncio.get_running_loop().run_in_executor(self._executor, connect)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._write_loop(), name="ocd-store-writer")

    def background(self) -> list[asyncio.Task[None]]:
        return [self._task] if self._task is not None else []

    def submit(self, op: Op) -> asyncio.Future[Any]:
        """Add ``op`` to the next group; its future has the result once that is committed.

        A plain function returning the future, not a coroutine: a send's caller awaits the
        future itself, one coroutine frame fewer to resume per send. A caller cancelled while
        it waits does not undo the write: the operation stays in the group and is committed;
        only its (cancelled) future goes unresolved."""
        if self._closing or self._task is None:
            raise StoreError("the store is closed")
        if self._task.done():
            raise StoreError("the store's writer has stopped")
        op.future = self._loop.create_future()
        self._pending.append(op)
        self._wake.set()
        return op.future

    async def checkpoint(self, truncate: bool = False) -> None:
        """A PASSIVE checkpoint on the write connection, between two groups: with no write
        under way it can copy the whole WAL back, and the next commit starts the WAL over.
        ``truncate``: a TRUNCATE checkpoint instead, which also cuts the WAL file to zero
        bytes (giving its space back to a full disk)."""
        if self._closing or self._task is None or self._task.done():
            raise StoreError("the store's writer has stopped")
        self._truncate = self._truncate or truncate
        done = asyncio.get_running_loop().create_future()
        self._checkpoints.append(done)
        self._wake.set()
        await done

    async def close(self) -> None:
        """Commit what is pending, then close the connection and its thread."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(self._executor, conn.close)
        self._executor.shutdown(wait=True)
        if isinstance(self._asleep, Asleep):
            self._asleep.close()

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._gather()
            while self._pending or self._checkpoints or self._checkpoint_due:
                if self._pending:
                    ops = self._pending[:MAX_GROUP]
                    del self._pending[:MAX_GROUP]
                    await self._commit_group(ops)
                if self._checkpoints or self._checkpoint_due:
                    await self._checkpoint()
            if self._closing:
                return

    async def _gather(self) -> None:
        """Before a group that will be fsynced, let the loop run while each of its turns
        brings more operations: requests it has still to parse join this group instead of
        waiting for the next commit, and the fsync, the largest part of a commit, is shared
        by more of them. The first turn that brings nothing (the loop has nothing more to
        hand over: at light load, the first one) ends the wait; so do ``GATHER_S`` and
        ``GATHER_ROWS``, which keeps the group small enough to commit on the loop."""
        if self._durability != "full" or self._closing:
            return
        if not any(op.durable for op in self._pending):
            return  # claims and acks only: no fsync to share
        seen = len(self._pending)
        rows = sum(_rows(op) for op in self._pending)
        deadline = self._monotonic() + GATHER_S
        while rows < GATHER_ROWS and self._monotonic() < deadline:
            await asyncio.sleep(0)
            now = len(self._pending)
            if now == seen or self._closing:
                return
            rows += sum(_rows(op) for op in self._pending[seen:now])
            seen = now

    async def _commit_group(self, ops: list[Op]) -> None:
        # Any exception, not only sqlite3's: an operation that fails in some other way (a
        # bug) must fail its own caller, not stop the writer and leave every caller waiting.
        ops = self._admitted(ops)
        if not ops:
            return
        try:
            tx = await self._commit(ops)
        except Exception as e:
            err = self._told(e)
            if len(ops) == 1 and not isinstance(err, StoreFull):
                self._fail(ops[0], e, err)
                return
            # Isolate the failure: one bad operation must not fail its neighbours. A disk
            # that has just filled released the reserve (``_told``): sends are refused now
            # (``_admitted``), and claims and acks, even one alone in its group, are tried
            # again in the room it left, rather than failing the consumer draining the disk.
            for op in ops:
                if not self._admitted([op]):
                    continue
                try:
                    tx = await self._commit([op])
                except Exception as e1:
                    self._fail(op, e1)
                else:
                    self._done(tx, [op])
            return
        self._done(tx, ops)

    def _admitted(self, ops: list[Op]) -> list[Op]:
        """``ops`` less those refused now (sends while the disk is full), which fail at
        once without being tried: they would take the room kept for acks."""
        refusal = self._refuse()
        if refusal is None:
            return ops
        kept = []
        for op in ops:
            if op.grows:
                if not op.future.done():
                    op.future.set_exception(refusal)
            else:
                kept.append(op)
        return kept

    def _told(self, e: BaseException) -> StoreError | None:
        """Tell the store of a driver error (it may mean the disk is full); the ocd error."""
        if not isinstance(e, sqlite3.Error):
            return None
        err = translate(e, str(self._path), "database write")
        self._on_error(err)
        return err

    def _fail(self, op: Op, e: Exception, told: StoreError | None = None) -> None:
        """Fail ``op``'s caller with ``e`` as an ocd error; ``told``: the store has already
        heard of ``e`` (``_told``), as that error."""
        err = told if told is not None else self._told(e)
        if op.future.done():
            return
        if isinstance(e, OcdError):  # a rule the operation itself enforced (queue gone, ...)
            op.future.set_exception(e)
            return
        if err is None:
            log.error("a store operation failed", exc_info=e, extra={"event": "store_op_failed"})
            err = translate(e, str(self._path), "database write")
        op.future.set_exception(err)

    async def _commit(self, ops: list[Op]) -> Tx:
        """One transaction: inline on the loop when it is small and the disk has been fast,
        otherwise on the writer's thread."""
        if not self._inline(ops):
            threaded: Tx = await self.call(self._run, ops)
            return threaded
        assert self._conn is not None
        slept = self._asleep()
        try:
            tx = self._run(self._conn, ops)
        finally:
            self._slow.append(self._asleep() - slept > SLOW_INLINE_S)
            if 2 * sum(self._slow) > INLINE_WINDOW:
                self._threaded_until = self._monotonic() + THREAD_AFTER_SLOW_S
                self._slow.clear()  # judge the disk afresh when that time is up
        tx.on_loop = True
        return tx

    def inline_now(self) -> bool:
        """Whether small groups commit on the loop now (the disk has been fast)."""
        return self._monotonic() >= self._threaded_until

    def _inline(self, ops: list[Op]) -> bool:
        if not self.inline_now():
            return False
        total = 0
        for op in ops:
            if op.most_rows is None:
                return False
            total += op.most_rows
        return total <= INLINE_ROWS

    async def _checkpoint(self) -> None:
        waiting, self._checkpoints = self._checkpoints, []
        mode = "TRUNCATE" if self._truncate else "PASSIVE"
        self._truncate = self._checkpoint_due = False
        error: StoreError | None = None
        try:
            await self.call(_checkpoint, mode)
        except sqlite3.Error as e:
            error = translate(e, str(self._path), "WAL checkpoint")
            self._on_error(error)
        for done in waiting:
            if done.done():
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    def _done(self, tx: Tx, ops: list[Op]) -> None:
        """The group is committed: every caller hears success, whatever happens after."""
        self.commits += 1
        try:
            self._after_commit(tx, ops)
        except Exception:  # a bug in the bookkeeping must not turn a commit into a failure
            log.exception("after a commit", extra={"event": "store_op_failed"})
        for op in ops:
            if not op.future.done():
                op.future.set_result(op.result)
        if self._refuse() is not None:
            # The disk is full: checkpoint after every group, so that the WAL starts over
            # instead of growing into the room left. Claims and deletes of large messages
            # rewrite their pages: draining a queue writes about twice its bytes.
            self._checkpoint_due = True
        elif self.wal_limit and (tx.delta or self.commits % 32 == 0):
            # Checked here, not only by the store's checkpoint loop every half second:
            # fast sends grow the WAL by tens of MB in that time, past what a full disk's
            # reserve can take back.
            if _size(self._wal) > self.wal_limit:
                self._checkpoint_due = True

    def _run(self, conn: sqlite3.Connection, ops: list[Op]) -> Tx:
        """One transaction, on the writer's thread or, for a small group, the loop's."""
        tx = Tx(conn, self.delivered)
        durable = any(op.durable for op in ops)
        if self._durability == "full":
            sync = "FULL" if durable else "NORMAL"
            if sync != self._sync:
                conn.execute(f"PRAGMA synchronous={sync}")
                self._sync = sync
        counted = durable and self._mark is not None
        changes = conn.total_changes
        conn.execute("BEGIN IMMEDIATE")
        try:
            enqueues = [op for op in ops if isinstance(op, Enqueue)]
            if enqueues:
                # All pending sends in as few statements as possible: the point of group commit.
                insert(tx, send_rows(tx, enqueues))
                for e in enqueues:
                    e.account(tx)
            for op in ops:
                if not isinstance(op, Enqueue):
                    op.apply(tx)
            self._before_commit(tx)
            if counted:
                conn.execute(sql.SET_COMMITS, (self.durable_commits + 1,))
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            # A COMMIT that failed (a full disk, an I/O error) committed nothing: roll back
            # what SQLite kept open, so that the failure the callers hear is the truth and
            # the next group starts clean. Nothing after a COMMIT that succeeded can fail
            # its callers (``_done``).
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        tx.wrote = conn.total_changes != changes
        if tx.learnt:
            self.delivered.learn(tx.learnt)
        if counted:
            self.durable_commits += 1
            if self._durability == "full":  # synchronous=FULL: the commit is on disk now
                self._advance_mark()
        return tx

    def _advance_mark(self) -> None:
        assert self._mark is not None
        try:
            self._mark.advance(self.durable_commits)
        except OSError as e:  # the commit stands; only the mark lags, which is safe
            if not self._mark_failed:
                self._mark_failed = True
                log.warning("could not update the high-water mark: %s", e)


def _rows(op: Op) -> int:
    """Rows an operation touches, for gathering; one of unknown size counts as many."""
    return INLINE_ROWS if op.most_rows is None else op.most_rows


def _checkpoint(conn: sqlite3.Connection, mode: str = "PASSIVE") -> None:
    conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
