"""The PostgreSQL backend's core: the state, connections, lifecycle and background loops
that every facet of ``PostgresStore`` shares.

Sends go through the group-committing writer (``writer.py``) on a connection of its own;
every other operation runs on a pool connection, in a transaction of its own. Pool sessions
run with ``synchronous_commit = off``: a claim, settle or release lost to a server crash
only means a redelivery; sends and queue administration set it on for their transaction
(``durability = "full"``). Pool sessions also use ``plan_cache_mode = force_custom_plan``,
so that a prepared claim with ``LIMIT $3`` is planned for its real parameters every time
instead of switching to a generic plan that scans the queue, and ``enable_bitmapscan =
off``, so that a table without statistics yet is still read in index order.

Every node registers in ``ocd_nodes`` with a heartbeat; a live node returns the PUSH
leases of a node whose heartbeat lapsed (``node_heartbeat_s``). The catalogue (queues and
pull consumers) is held in memory and reloaded on ``ocd_catalogue`` notifications, when
the change feed's connection is made again (or while it cannot be) and at least every
``CATALOGUE_POLL_S``; each queue's backlog count is also read again while the dashboard
watches (``queue_stats``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg

from ocd.clock import Clock, wall_ms
from ocd.dsn import redact_dsn
from ocd.errors import (
    OcdError,
    QueueNotFound,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)
from ocd.files import private_dir
from ocd.store import rules
from ocd.store.catalogue import Catalogue
from ocd.store.postgres import fifo, mark, sql
from ocd.store.postgres.errors import is_driver_error, translate, translating
from ocd.store.postgres.feed import Feed
from ocd.store.postgres.writer import SHARDS, GroupWriter
from ocd.store.rows import consumer_from_row, queue_from_row
from ocd.store.values import CATALOGUE_FRESH_S, Backlog, DeadLetter, QueueRecord

# While the change feed listens, a reload of the catalogue beside its notifications.
CATALOGUE_POLL_S = 60.0

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 30.0


class PostgresCore:
    def __init__(
        self,
        dsn: str,
        durability: str = "full",
        pool_size: int = 10,
        node_heartbeat_s: float = 15.0,
        clock: Clock = wall_ms,
        data_dir: Path | None = None,
        accept_data_loss: bool = False,
    ) -> None:
        self.dsn = dsn
        # The node's own directory, where it records which database it ran on and how far
        # that got (``mark.py``); None (tools, tests of the store alone): no record kept.
        self.data_dir = data_dir
        self.accept_data_loss = accept_data_loss
        self._recorder: mark.Recorder | None = None
        # The time of what the store does by itself (leases it hands back make messages
        # ready "now"): the daemon's clock, so that a step of the wall clock delays nothing.
        self.clock = clock
        self.where = redact_dsn(dsn)
        self.durability = durability
        self.pool_size = pool_size
        self.node_heartbeat_s = node_heartbeat_s
        self.node_id = secrets.token_hex(8)
        self._pool: asyncpg.Pool | None = None
        self._writer: GroupWriter | None = None
        self._feed: Feed | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.catalogue = Catalogue()
        self._catalogue_dirty = asyncio.Event()
        self._stopping = asyncio.Event()
        self._doubtful: set[int] = set()  # PUSH leases of claims whose reply was lost
        self._closing = False
        self._down_since: float | None = None
        self._full: str | None = None  # the last write's "disk full", until a send succeeds
        self.on_commit: Callable[[int, bool], None] | None = None

    # ---------------------------------------------------------------- connections

    async def _connect(self, **settings: str) -> asyncpg.Connection:
        conn: asyncpg.Connection = await asyncpg.connect(
            self.dsn,
            timeout=CONNECT_TIMEOUT_S,
            command_timeout=COMMAND_TIMEOUT_S,
            server_settings={"application_name": f"ocd {self.node_id}", **settings},
        )
        return conn

    async def _writer_connection(self) -> asyncpg.Connection:
        sync = "on" if self.durability == "full" else "off"
        return await self._connect(synchronous_commit=sync)

    @contextlib.asynccontextmanager
    async def _db(
        self, operation: str, queue: QueueRecord | None = None
    ) -> AsyncIterator[asyncpg.Connection]:
        """A pool connection for ``operation`` (on ``queue``); the one boundary where driver
        errors become ocd's (``ocd.store.postgres.errors``). A foreign-key violation means
        the queue was deleted meanwhile, on this node or another."""
        if self._closing or self._pool is None:
            raise StoreError("the store is closed", self.where, operation)
        try:
            async with self._pool.acquire(timeout=CONNECT_TIMEOUT_S) as conn:
                try:
                    yield conn
                except Exception as e:
                    if isinstance(translate(e, self.where, operation), StoreUnavailable):
                        # A connection that failed this way (the server went away, or it
                        # was left mid-operation) must not be handed out again: the pool
                        # replaces a terminated one.
                        with contextlib.suppress(Exception):
                            conn.terminate()
                    raise
        except OcdError:
            raise
        except Exception as e:
            if not is_driver_error(e):
                raise
            err = translate(e, self.where, operation)
            if isinstance(err, StoreUnavailable):
                self._mark_down()
            if isinstance(err, StoreFull):
                self._mark_full(err)
            if isinstance(err, StoreConflict) and err.what == "foreign_key":
                raise QueueNotFound(queue.name if queue else "?") from e
            raise err from e
        self._mark_up()

    def _mark_down(self) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning(
                "database %s is unavailable; retrying",
                self.where,
                extra={"event": "store_unavailable", "where": self.where},
            )

    def _mark_up(self) -> None:
        if self._down_since is not None:
            away = time.monotonic() - self._down_since
            self._down_since = None
            log.warning(
                "database %s answers again after %.1f s",
                self.where,
                away,
                extra={"event": "store_available", "where": self.where},
            )

    def available(self) -> bool:
        return not self._closing and self._down_since is None

    def full(self) -> str | None:
        return self._full

    def _mark_full(self, err: StoreError) -> None:
        if self._full is None:
            self._full = f"the database server's disk is full ({self.where}): {err}"
            log.error(self._full, extra={"event": "store_full", "where": self.where})

    def _sent(self) -> None:
        self._mark_up()
        if self._full is not None:
            self._full = None
            log.warning(
                "database %s accepts sends again", self.where, extra={"event": "store_space_back"}
            )

    # ---------------------------------------------------------------- lifecycle

    async def open(self, now_ms: int) -> None:
        with translating(self.where, "connect"):
            conn = await self._connect()
        try:
            with translating(self.where, "look"):
                found_id, (seq, insert_lsn, flush_lsn) = await mark.look(conn)
            record = None
            if self.data_dir is not None:  # refused before anything in the database changes
                path = mark.record_path(self.data_dir)
                record = mark.judge(path, found_id, seq, self.where, self.accept_data_loss)
            with translating(self.where, "migrate"):
                await self._migrate(conn)
                database_id = await mark.identity(conn, secrets.token_bytes(16))
        finally:
            await conn.close()
        if self.data_dir is not None:
            durable = seq if flush_lsn >= insert_lsn else 0
            start = max(durable, record.seq if record is not None else 0)
            recorder = mark.Recorder(path, database_id, start, self.where)
            try:
                private_dir(self.data_dir)
            except OSError:
                pass  # the recorder says so
            recorder.start()
            self._recorder = recorder
        with translating(self.where, "connect"):
            self._pool = await asyncpg.create_pool(
                self.dsn,
                reset=_keep_session,
                min_size=1,
                max_size=self.pool_size,
                timeout=CONNECT_TIMEOUT_S,
                command_timeout=COMMAND_TIMEOUT_S,
                server_settings={
                    "application_name": f"ocd {self.node_id}",
                    "synchronous_commit": "off",
                    "plan_cache_mode": "force_custom_plan",
                    # Every hot statement is an ordered range of an index or a lookup by
                    # key; before a new or fast-filling table has statistics, the planner
                    # would read every ready row through a bitmap and sort them instead.
                    "enable_bitmapscan": "off",
                },
            )
        try:
            async with self._db("register node") as c:
                await c.execute(sql.REGISTER_NODE, self.node_id, socket.gethostname(), os.getpid())
            await self._reap(now_ms)
            await self._load()
            self._feed = Feed(self._connect, self.catalogue.notify, self._catalogue_dirty.set)
            self.catalogue.on_watch = self._feed.listen
            await self._feed.ensure()
            self._writer = GroupWriter(self._writer_connection, self.where, self._committed)
            self._writer.on_commit = self._on_commit
            self._writer.start()
        except BaseException:
            await self._pool.close()
            self._pool = None
            raise
        self._tasks = [
            asyncio.create_task(self._feed_loop(), name="ocd-store-pg-feed"),
            asyncio.create_task(self._heartbeat_loop(), name="ocd-store-pg-heartbeat"),
        ]
        if self._recorder is not None:
            self._tasks.append(
                asyncio.create_task(self._record_loop(self._recorder), name="ocd-store-pg-mark")
            )

    def _on_commit(self, ops: int, on_loop: bool) -> None:
        if self.on_commit is not None:
            self.on_commit(ops, on_loop)

    async def _migrate(self, conn: asyncpg.Connection) -> None:
        """Bring the schema up to date under an advisory lock: of nodes starting together,
        one migrates and the others find it done."""
        await conn.execute("SELECT pg_advisory_lock($1)", sql.SCHEMA_LOCK)
        try:
            async with conn.transaction():
                await conn.execute(sql.SCHEMA_TABLE)
                version = await conn.fetchval(sql.SCHEMA_VERSION)
                if version is None:
                    await conn.execute(sql.SCHEMA_INIT)
                    version = 0
            latest = len(sql.MIGRATIONS)
            if version > latest:
                raise StoreCorrupt(
                    f"{self.where} has ocd schema version {version}, newer than this ocd "
                    f"understands ({latest}); run a newer ocd",
                    self.where,
                    "migrate",
                )
            for target in range(version + 1, latest + 1):
                async with conn.transaction():
                    await conn.execute(sql.MIGRATIONS[target - 1])
                    await conn.execute(sql.SCHEMA_SET, target)
                log.info("database %s migrated to schema %d", self.where, target)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", sql.SCHEMA_LOCK)

    def background(self) -> list[asyncio.Task[Any]]:
        writer = self._writer.background() if self._writer is not None else []
        return [*writer, *self._tasks]

    async def close(self) -> None:
        if self._closing:
            return
        if self._writer is not None:
            await self._writer.close()
        # Let the background loops finish what they are doing rather than cancel them in
        # the middle of a query (a connection cancelled mid-query can wedge the pool's close).
        self._stopping.set()
        self._catalogue_dirty.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=COMMAND_TIMEOUT_S / 3)
            for t in late:
                t.cancel()
            for t in self._tasks:
                with contextlib.suppress(BaseException):
                    await t
        self._tasks = []
        if self._pool is not None and self._recorder is not None:
            with contextlib.suppress(StoreError):
                await self._record_last(self._recorder)
        if self._pool is not None:
            with contextlib.suppress(StoreError):
                async with self._db("return leases") as c:
                    now_ms = self.clock()
                    rows = await c.fetch(sql.RETURN_OWN, self.node_id, now_ms)
                    await self._refresh_returned(c, rows)
                    for key in {r[0] for r in rows}:
                        await c.execute(sql.NOTIFY, sql.queue_channel(key))
                    await self._end_leases(c, now_ms, 1, sql.OWN_LEASES, self.node_id)
                    await c.execute(sql.FORGET_NODE, self.node_id)
        self._closing = True
        if self._feed is not None:
            await self._feed.close()
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), 5)
            except Exception:
                self._pool.terminate()
            self._pool = None

    @property
    def commits(self) -> int:
        return self._writer.commits if self._writer is not None else 0

    # ---------------------------------------------------------------- nodes and the feed

    async def _heartbeat_loop(self) -> None:
        every = max(self.node_heartbeat_s / 3, 0.05)
        reap_after = 0.0
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), every)
            if self._stopping.is_set():
                return
            try:
                async with self._db("heartbeat") as c:
                    alive = await c.execute(sql.HEARTBEAT, self.node_id)
                    if alive == "UPDATE 0":
                        # Taken for dead (a long pause): our leases were handed back already.
                        log.warning(
                            "this node's heartbeat had lapsed; registering again",
                            extra={"event": "node_reregistered", "node": self.node_id},
                        )
                        await c.execute(
                            sql.REGISTER_NODE, self.node_id, socket.gethostname(), os.getpid()
                        )
                if self._doubtful:
                    await self._return_doubtful(self.clock())
                # After an outage every node's heartbeat looks old: give the others one
                # heartbeat's time to beat again before taking any of them for dead.
                if time.monotonic() >= reap_after:
                    await self._reap(self.clock())
            except StoreError:
                reap_after = time.monotonic() + self.node_heartbeat_s
                continue

    async def _record_loop(self, recorder: mark.Recorder) -> None:
        """Keep this node's record of the database's position (``mark.py``) a second or so
        behind the database."""
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), mark.RECORD_EVERY_S)
            if self._stopping.is_set():
                return
            with contextlib.suppress(StoreError):
                async with self._db("record the database's position") as c:
                    recorder.observe(*await mark.position(c))

    async def _record_last(self, recorder: mark.Recorder) -> None:
        """At a clean shutdown: the position the database ends at, once the WAL is flushed
        past it (the WAL writer does so within a fraction of a second)."""
        async with self._db("record the database's position") as c:
            for _ in range(20):
                seq, insert_lsn, flush_lsn = await mark.position(c)
                recorder.observe(seq, insert_lsn, flush_lsn)
                if flush_lsn >= insert_lsn and recorder.settled:
                    return
                await asyncio.sleep(0.05)

    async def _return_doubtful(self, now_ms: int) -> None:
        """Hand back what claims that failed with the connection may have leased: a claim
        can commit and lose its reply, and its messages would wait out the whole lease."""
        leases = sorted(self._doubtful)
        async with self._db("return leases of failed claims") as c:
            rows = await c.fetch(sql.RETURN_DOUBTFUL, self.node_id, leases, now_ms)
            await self._refresh_returned(c, rows)
            for key in {r[0] for r in rows}:
                await c.execute(sql.NOTIFY, sql.queue_channel(key))
            n = len(rows) + await self._end_leases(
                c, now_ms, 0, sql.DOUBTFUL_LEASES, self.node_id, leases
            )
        self._doubtful.difference_update(leases)
        if n:
            log.warning(
                "returned %d message(s) leased by claims whose reply was lost",
                n,
                extra={"event": "inflight_recovered", "count": n},
            )

    async def _refresh_returned(self, c: asyncpg.Connection, rows: Sequence[Any]) -> None:
        """After leases were handed back by (queue, group) rows: the FIFO groups they held
        are ready again now, not at the old lease's deadline."""
        by_queue: dict[int, set[str]] = {}
        for key, grp in rows:
            if grp is not None:
                by_queue.setdefault(key, set()).add(grp)
        for key, groups in by_queue.items():
            async with c.transaction():
                await fifo.lock(c, key)
                await fifo.refresh(c, key, groups)

    async def _end_leases(
        self, c: asyncpg.Connection, now_ms: int, plus: int, which: str, *args: Any
    ) -> int:
        """End the standard queues' leases that ``which`` finds (by queue), one queue a
        transaction: their messages appended anew now, ``plus`` attempts counted."""
        total = 0
        for key, leases in await c.fetch(which, *args):
            total += await c.fetchval(sql.END_LEASES, key, now_ms, plus, list(leases))
        return total

    async def _reap(self, now_ms: int) -> None:
        """Return the PUSH leases of nodes whose heartbeat lapsed (and of any node no longer
        registered)."""
        async with self._db("return leases of silent nodes") as c:
            rows = await c.fetch(sql.REAP_NODES, float(self.node_heartbeat_s), now_ms, self.node_id)
            await self._refresh_returned(c, rows)
            keys = {r[0] for r in rows}
            for key in keys:
                await c.execute(sql.NOTIFY, sql.queue_channel(key))
            n = len(rows) + await self._end_leases(c, now_ms, 1, sql.ORPHAN_LEASES)
        if n:
            log.warning(
                "returned %d message(s) leased by node(s) that went silent",
                n,
                extra={"event": "inflight_recovered", "count": n},
            )

    async def _feed_loop(self) -> None:
        """Every ``CATALOGUE_FRESH_S``: the feed's connection made again if it was lost. The
        catalogue is reloaded when notified of a change, when the feed was (re)made or is
        down (notifications may have been missed) and otherwise every ``CATALOGUE_POLL_S``:
        with thousands of queues a reload a second was most of an idle node's work."""
        assert self._feed is not None
        loaded = -CATALOGUE_POLL_S
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._catalogue_dirty.wait(), CATALOGUE_FRESH_S)
            notified = self._catalogue_dirty.is_set()
            self._catalogue_dirty.clear()
            if self._stopping.is_set():
                return
            connects = self._feed.connects
            missed = True  # the feed down, or down until now: notifications may be lost
            try:
                # every channel asked for (a queue's first watcher asks, ``on_watch``) is
                # listened to by the connection, or by the next one made
                missed = not await self._feed.ensure() or self._feed.connects != connects
                if notified or missed or time.monotonic() - loaded >= CATALOGUE_POLL_S:
                    await self._load()
                    loaded = time.monotonic()
            except StoreError:
                pass
            if missed:  # the fallback: a notification missed costs at most this long
                self.catalogue.notify_all()

    async def _load(self) -> None:
        """Replace the catalogue with the database's. A change this node made while the
        read was under way would be older in the snapshot than in memory: then the snapshot
        is dropped and the next round reads again."""
        version = self.catalogue.version
        async with self._db("load catalogue") as c:
            queues = [queue_from_row(r) for r in await c.fetch(sql.SELECT_QUEUES)]
            consumers = [consumer_from_row(r) for r in await c.fetch(sql.SELECT_CONSUMERS)]
            counts = {r[0]: int(r[1]) for r in await c.fetch(sql.ALL_COUNTS)}
        if version != self.catalogue.version:
            self._catalogue_dirty.set()
            return
        self.catalogue.replace(queues, consumers, counts)

    def _committed(self, backlogs: dict[int, Backlog]) -> None:
        for key, b in backlogs.items():
            self.catalogue.set_count(key, b.count)
            self.catalogue.notify(key)

    # ---------------------------------------------------------------- shared by the facets
    # Messages dead-letters and deletes on claims and settles, MoveTasks on moves.

    async def _durable(self, c: asyncpg.Connection) -> None:
        """Inside a transaction: commit it durably (pool sessions default to off)."""
        if self.durability == "full":
            await c.execute("SET LOCAL synchronous_commit = on")

    async def _dead_letter(
        self,
        c: asyncpg.Connection,
        queue: QueueRecord,
        seqs: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> tuple[int, int]:
        if not seqs:
            return 0, 0
        shard = random.randrange(SHARDS)
        to = rules.destination(queue, dead_letter, self.catalogue.knows)
        if to is rules.Destination.DELETE:
            deleted = await c.fetchval(sql.DELETE_SEQS, queue.key, list(seqs), shard)
            await self._removed(c, queue, seqs)
            return 0, deleted
        dlq = dead_letter.queue
        assert dlq is not None
        if to is rules.Destination.MOVE_FIFO:  # the caller holds both queues' FIFO locks
            moved = await fifo.move(c, queue, seqs, dlq, now_ms)
            await c.execute(sql.NOTIFY, sql.queue_channel(dlq.key))
            return moved, 0
        # appended to the destination's log, attempts and first receive starting again
        moved = await c.fetchval(
            sql.REAPPEND, queue.key, list(seqs), now_ms, 0, None, dlq.key, shard
        )
        await self._removed(c, queue, seqs)
        return moved, 0

    async def _removed(
        self, c: asyncpg.Connection, queue: QueueRecord, seqs: Sequence[int]
    ) -> None:
        """Messages of a standard queue were deleted or moved away in this transaction:
        their held rows and the leases they emptied go."""
        if seqs and not queue.fifo:
            await c.execute(sql.REMOVED, queue.key, list(seqs))

    async def _delete(self, c: asyncpg.Connection, queue: QueueRecord, seqs: Sequence[int]) -> int:
        if queue.fifo:
            await fifo.lock(c, queue.key)
            touched = await fifo.delete(c, queue, seqs)
            await fifo.refresh(c, queue.key, touched)
            return len(touched)
        n: int = await c.fetchval(sql.DELETE_SEQS, queue.key, list(seqs), random.randrange(SHARDS))
        await self._removed(c, queue, seqs)
        return n


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A pool connection's reset on release, beyond asyncpg's own rollback of a transaction
    left open: nothing. ocd leaves no session state on a pool connection (its settings are
    ``SET LOCAL`` or given at connect, its locks transaction-scoped, its LISTEN and its
    session lock on connections of their own), so asyncpg's default reset
    (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) would be one more round
    trip and transaction on every release: about half of the transactions of a claim and
    its settle."""


def _rowcount(status: str) -> int:
    try:
        return int(status.rsplit(" ", 1)[1])
    except (IndexError, ValueError):
        return 0
