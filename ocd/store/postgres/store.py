"""The PostgreSQL backend: one database shared by any number of ocd nodes.

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
pull consumers) is held in memory and reloaded on ``ocd_catalogue`` notifications and at
least every ``CATALOGUE_FRESH_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
from ocd.store.base import (
    CATALOGUE_FRESH_S,
    MOVE_ACTIVE,
    MOVE_FINISHED,
    MOVE_TASK_KEPT_MS,
    Backlog,
    BrowseCursor,
    Browsed,
    BrowseQuery,
    Claimed,
    DeadLetter,
    Delivery,
    Expired,
    FifoSent,
    LeaseKind,
    MoveTaskRow,
    NewMessage,
    NotReady,
    PullConsumer,
    QueueExtras,
    QueueRecord,
    QueueSettings,
    Ready,
    Retry,
    Searched,
    Settled,
)
from ocd.store.catalogue import Catalogue
from ocd.store.postgres import fifo, mark, sql
from ocd.store.postgres.errors import is_driver_error, translate, translating
from ocd.store.postgres.feed import Feed
from ocd.store.postgres.writer import SHARDS, GroupWriter
from ocd.store.rows import (
    CLOCK_MARK_KEY,
    consumer_from_row,
    consumer_settings,
    extras_from_row,
    extras_row,
    mark_from_bytes,
    mark_to_bytes,
    move_task_from_row,
    move_task_row,
    queue_from_row,
    settings_row,
)

log = logging.getLogger(__name__)

CHUNK = 5000  # rows per retention or purge statement
CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 30.0


class PostgresStore:
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
                self.data_dir.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the recorder says so
            recorder.start()
            self._recorder = recorder
        with translating(self.where, "connect"):
            self._pool = await asyncpg.create_pool(
                self.dsn,
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
                    await c.execute(sql.FORGET_NODE, self.node_id)
                    await self._refresh_returned(c, rows)
                    for key in {r[0] for r in rows}:
                        await c.execute(sql.NOTIFY, sql.queue_channel(key))
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
        self._doubtful.difference_update(leases)
        if rows:
            log.warning(
                "returned %d message(s) leased by claims whose reply was lost",
                len(rows),
                extra={"event": "inflight_recovered", "count": len(rows)},
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

    async def _reap(self, now_ms: int) -> None:
        """Return the PUSH leases of nodes whose heartbeat lapsed."""
        async with self._db("return leases of silent nodes") as c:
            rows = await c.fetch(sql.REAP_NODES, float(self.node_heartbeat_s), now_ms, self.node_id)
            await self._refresh_returned(c, rows)
            keys = {r[0] for r in rows}
            for key in keys:
                await c.execute(sql.NOTIFY, sql.queue_channel(key))
        if rows:
            log.warning(
                "returned %d message(s) leased by node(s) that went silent",
                len(rows),
                extra={"event": "inflight_recovered", "count": len(rows)},
            )

    async def _feed_loop(self) -> None:
        assert self._feed is not None
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._catalogue_dirty.wait(), CATALOGUE_FRESH_S)
            self._catalogue_dirty.clear()
            if self._stopping.is_set():
                return
            try:
                if await self._feed.ensure():
                    for key in self.catalogue.watched():
                        self._feed.listen(key)
                await self._load()
            except StoreError:
                pass
            # the fallback: a notification missed costs at most this long
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

    # ---------------------------------------------------------------- catalogue

    def queues(self) -> list[QueueRecord]:
        return self.catalogue.queues()

    def queue(self, name: str, account: str = "local") -> QueueRecord | None:
        return self.catalogue.queue(name, account)

    def queue_by_id(self, queue_id: str) -> QueueRecord | None:
        return self.catalogue.queue_by_id(queue_id)

    def pull_consumer(self, queue: QueueRecord) -> PullConsumer | None:
        return self.catalogue.pull_consumer(queue)

    async def lookup(self, name: str, account: str = "local") -> QueueRecord | None:
        found = self.catalogue.queue(name, account)
        if found is None:
            async with self._db("read queue") as c:
                row = await c.fetchrow(sql.SELECT_QUEUE, account, name)
            if row is not None:
                found = queue_from_row(row)
                self.catalogue.remember(found)
                self._catalogue_dirty.set()  # its consumer too, and anything else missed
        return found

    async def lookup_by_id(self, queue_id: str) -> QueueRecord | None:
        found = self.catalogue.queue_by_id(queue_id)
        if found is None and len(queue_id) == 32:
            async with self._db("read queue") as c:
                row = await c.fetchrow(sql.SELECT_QUEUES + " WHERE queue_id = $1", queue_id)
            if row is not None:
                found = queue_from_row(row)
                self.catalogue.remember(found)
                self._catalogue_dirty.set()
        return found

    # ---------------------------------------------------------------- administration

    async def _durable(self, c: asyncpg.Connection) -> None:
        """Inside a transaction: commit it durably (pool sessions default to off)."""
        if self.durability == "full":
            await c.execute("SET LOCAL synchronous_commit = on")

    async def create_queue(
        self, name: str, account: str, settings: QueueSettings, now_ms: int
    ) -> QueueRecord:
        async with self._db("create queue") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.INSERT_QUEUE,
                account,
                name,
                secrets.token_hex(16),
                now_ms,
                now_ms,
                *settings_row(settings),
            )
            if row is None:
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "create"
                )
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        record = queue_from_row(row)
        self.catalogue.remember(record)
        return record

    async def ensure_queue(
        self, name: str, account: str, settings: QueueSettings | None, now_ms: int
    ) -> QueueRecord:
        existing = self.queue(name, account)
        if existing is None:
            try:
                return await self.create_queue(name, account, settings or QueueSettings(), now_ms)
            except StoreConflict:
                async with self._db("read queue") as c:
                    row = await c.fetchrow(sql.SELECT_QUEUE, account, name)
                if row is None:
                    raise
                existing = queue_from_row(row)
                self.catalogue.remember(existing)
        if settings is None or settings == existing.settings:
            return existing
        return await self.update_queue(existing, settings, now_ms)

    async def update_queue(
        self, queue: QueueRecord, settings: QueueSettings, now_ms: int, new_name: str | None = None
    ) -> QueueRecord:
        name = new_name or queue.name
        try:
            async with self._db("update queue") as c, c.transaction():
                await self._durable(c)
                row = await c.fetchrow(
                    sql.UPDATE_QUEUE, name, now_ms, *settings_row(settings), queue.key
                )
                if row is None:
                    raise QueueNotFound(queue.name)
                await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
                await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        except StoreConflict as e:
            raise StoreConflict(
                f"a queue named {name} already exists", "queue_name", self.where, "rename"
            ) from e
        record = queue_from_row(row)
        self.catalogue.remember(record)
        self.catalogue.notify(queue.key)
        return record

    async def delete_queue(self, queue: QueueRecord) -> None:
        async with self._db("delete queue") as c, c.transaction():
            await self._durable(c)
            await c.execute(sql.DELETE_QUEUE, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        self.catalogue.forget(queue)

    async def put_pull_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.UPSERT_CONSUMER,
                queue.key,
                consumer.consumer_id,
                consumer.created_ms,
                consumer.dead_letter_queue,
                consumer_settings(consumer),
            )
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        _key, cid, created = row
        stored = dataclasses.replace(
            consumer, queue_key=queue.key, consumer_id=cid, created_ms=created
        )
        self.catalogue.put_consumer(stored)
        return stored

    async def delete_pull_consumer(self, queue: QueueRecord) -> bool:
        async with self._db("delete consumer") as c, c.transaction():
            await self._durable(c)
            status = await c.execute(sql.DELETE_CONSUMER, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        self.catalogue.drop_consumer(queue)
        return bool(status != "DELETE 0")

    async def secret(self, name: str) -> bytes:
        async with self._db("read secret") as c, c.transaction():
            await self._durable(c)
            await c.execute(sql.PUT_META, name, secrets.token_bytes(32))
            value = await c.fetchval(sql.GET_META, name)
        return bytes(value)

    async def clock_mark(self) -> int:
        async with self._db("read the clock's mark") as c:
            value = await c.fetchval(sql.GET_META, CLOCK_MARK_KEY)
        return mark_from_bytes(value)

    async def save_clock_mark(self, now_ms: int) -> None:
        async with self._db("save the clock's mark") as c:
            await c.execute(sql.RAISE_META, CLOCK_MARK_KEY, mark_to_bytes(now_ms))

    # ---------------------------------------------------------------- messages

    async def enqueue(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> Backlog:
        if self._writer is None or self._closing:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if queue.fifo:
            fifo_backlog, _ = await self.enqueue_fifo(queue, messages)
            return fifo_backlog
        try:
            backlog: Backlog = await self._writer.submit(queue, messages)
        except StoreUnavailable:
            self._mark_down()
            raise
        except StoreFull as e:
            self._mark_full(e)
            raise
        self._sent()
        return backlog

    async def enqueue_fifo(
        self, queue: QueueRecord, messages: Sequence[NewMessage]
    ) -> tuple[Backlog, list[FifoSent]]:
        if self._writer is None or self._closing:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        try:
            result: tuple[Backlog, list[FifoSent]] = await self._writer.submit(queue, messages)
        except StoreUnavailable:
            self._mark_down()
            raise
        except StoreFull as e:
            self._mark_full(e)
            raise
        self._sent()
        return result

    async def ready(self, queue: QueueRecord, now_ms: int, limit: int) -> Ready:
        async with self._db("read") as c:
            count, first, nxt = await c.fetchrow(
                sql.READY_FIFO if queue.fifo else sql.READY, queue.key, now_ms, limit
            )
        return Ready(count, first, nxt)

    async def claim(
        self,
        queue: QueueRecord,
        limit: int,
        now_ms: int,
        lease_until_ms: int,
        max_attempts: int,
        dead_letter: DeadLetter,
        kind: LeaseKind = LeaseKind.PUSH,
        max_batches: int | None = None,
    ) -> Claimed:
        lease = secrets.randbits(62) + 1
        owner = self.node_id if kind == LeaseKind.PUSH else None
        args = (queue.key, now_ms, limit, lease_until_ms, lease, int(kind), owner)
        try:
            return await self._claim(queue, args, max_attempts, dead_letter, max_batches)
        except StoreUnavailable:
            if owner is not None:  # it may have committed before the connection went
                self._doubtful.add(lease)
            raise

    async def _claim(
        self,
        queue: QueueRecord,
        args: tuple[Any, ...],
        max_attempts: int,
        dead_letter: DeadLetter,
        max_batches: int | None,
    ) -> Claimed:
        lease = args[4]
        now_ms = args[1]
        if queue.fifo:
            return await self._claim_fifo(queue, args, max_attempts, dead_letter, max_batches)
        async with self._db("write", queue) as c:
            if max_batches is None:
                rows = await c.fetch(sql.CLAIM, *args)  # one statement, one round trip
            else:
                async with c.transaction():
                    # one capped claim of this queue at a time, deployment-wide
                    await c.execute(sql.XACT_LOCK, sql.CLAIM_LOCK, queue.key)
                    held = await c.fetchval(sql.PUSH_LEASES_HELD, queue.key, now_ms)
                    if held >= max_batches:
                        return Claimed([])
                    rows = await c.fetch(sql.CLAIM, *args)
            deliveries: list[Delivery] = []
            spent: list[int] = []
            exhausted: list[str] = []
            for seq, mid, ctype, body, sent_ms, attempts, attrs, first in rows:
                if attempts > max_attempts:
                    spent.append(seq)
                    exhausted.append(mid)
                else:
                    deliveries.append(
                        Delivery(
                            seq,
                            mid,
                            ctype,
                            body,
                            sent_ms,
                            attempts,
                            lease,
                            attrs=attrs,
                            first_received_ms=first,
                        )
                    )
            if spent:
                # Leased to us by the claim, so no one else can touch them meanwhile.
                async with c.transaction():
                    await self._dead_letter(c, queue, spent, dead_letter, now_ms)
        deliveries.sort(key=lambda d: d.seq)
        return Claimed(deliveries, exhausted)

    async def _claim_fifo(
        self,
        queue: QueueRecord,
        args: tuple[Any, ...],
        max_attempts: int,
        dead_letter: DeadLetter,
        max_batches: int | None,
    ) -> Claimed:
        key, now_ms, limit, until_ms, lease, kind, owner = args
        deliveries: list[Delivery] = []
        spent: list[int] = []
        exhausted: list[str] = []
        groups: set[str] = set()
        dlq = dead_letter.queue
        async with self._db("write", queue) as c:
            if max_batches is None:  # one statement: ocd_fifo_claim takes the lock itself
                rows = await fifo.claim(c, queue, limit, now_ms, until_ms, lease, kind, owner)
            else:
                async with c.transaction():
                    await fifo.lock(c, key)
                    held = await c.fetchval(sql.PUSH_LEASES_HELD, key, now_ms)
                    if held >= max_batches:
                        return Claimed([])
                    rows = await fifo.claim(c, queue, limit, now_ms, until_ms, lease, kind, owner)
            for row in rows:
                if row[5] > max_attempts:
                    spent.append(row[0])
                    exhausted.append(row[1])
                    groups.add(row[6])
                else:
                    deliveries.append(fifo.delivery(row, lease))
            if spent:  # leased to us by the claim: no one else touches them meanwhile
                async with c.transaction():
                    locks = [key]
                    if dlq is not None and dlq.fifo and self.catalogue.knows(dlq.key):
                        locks.append(dlq.key)
                    await fifo.lock(c, *locks)
                    await self._dead_letter(c, queue, spent, dead_letter, now_ms)
                    await fifo.refresh(c, key, groups)
        return Claimed(deliveries, exhausted)

    async def _settle_fifo(
        self,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        dlq = dead_letter.queue
        locks = [queue.key]
        if dead and dlq is not None and dlq.fifo and self.catalogue.knows(dlq.key):
            locks.append(dlq.key)
        retried = moved = deleted = 0
        if not retries and not dead:  # the common case: one statement, one round trip
            async with self._db("write", queue) as c:
                acked = await c.fetchval(
                    sql.FIFO_ACK, queue.key, list(acks), random.randrange(SHARDS)
                )
            self.catalogue.set_count(queue.key, self.catalogue.count(queue.key) - acked)
            return Settled(acked, 0, 0, 0)
        async with self._db("write", queue) as c, c.transaction():
            await fifo.lock(c, *locks)
            touched = await fifo.delete(c, queue, acks)
            acked = len(touched)
            retries, dead, back, groups = await fifo.hold_back(c, queue, acks, retries, dead)
            if retries:
                status = await c.execute(
                    sql.RETRY, queue.key, [r.seq for r in retries], [r.visible_ms for r in retries]
                )
                retried = _rowcount(status)
            if back:
                await c.execute(sql.RELEASE_ANY, queue.key, now_ms, back)
            moved, deleted = await self._dead_letter(c, queue, dead, dead_letter, now_ms)
            await fifo.refresh(c, queue.key, groups.union(touched))
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        if acked or deleted or moved:
            gone = acked + deleted + moved
            self.catalogue.set_count(queue.key, self.catalogue.count(queue.key) - gone)
        return Settled(acked, retried, moved, deleted)

    async def settle(
        self,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        if queue.fifo:
            return await self._settle_fifo(queue, acks, retries, dead, dead_letter, now_ms)
        shard = random.randrange(SHARDS)
        acked = retried = 0
        if not retries and not dead:  # the common case: one statement, one round trip
            async with self._db("write", queue) as c:
                acked, _ = await c.fetchrow(sql.ACK_AND_NOTIFY, queue.key, list(acks), shard)
            self.catalogue.set_count(queue.key, self.catalogue.count(queue.key) - acked)
            return Settled(acked, 0, 0, 0)
        async with self._db("write", queue) as c, c.transaction():
            if acks:
                acked = await c.fetchval(sql.DELETE_SEQS, queue.key, list(acks), shard)
            if retries:
                status = await c.execute(
                    sql.RETRY, queue.key, [r.seq for r in retries], [r.visible_ms for r in retries]
                )
                retried = _rowcount(status)
            # Retried messages may be ready, and a lease is gone: a capped consumer on
            # another node may start its next batch.
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
            moved, deleted = await self._dead_letter(c, queue, dead, dead_letter, now_ms)
        if acked:
            self.catalogue.set_count(queue.key, self.catalogue.count(queue.key) - acked)
        return Settled(acked, retried, moved, deleted)

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
        dlq = dead_letter.queue
        if dlq is None or not self.catalogue.knows(dlq.key):
            return 0, await c.fetchval(sql.DELETE_SEQS, queue.key, list(seqs), shard)
        if dlq.fifo and queue.fifo:  # the caller holds both queues' FIFO locks
            moved = await fifo.move(c, queue, seqs, dlq, now_ms)
            await c.execute(sql.NOTIFY, sql.queue_channel(dlq.key))
            return moved, 0
        moved = await c.fetchval(sql.MOVE_SEQS, queue.key, dlq.key, now_ms, list(seqs), shard)
        await c.execute(sql.NOTIFY, sql.queue_channel(dlq.key))
        return moved, 0

    async def release(
        self,
        queue: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
        kind: LeaseKind = LeaseKind.PUSH,
    ) -> int:
        async with self._db("write", queue) as c, c.transaction():
            if queue.fifo:
                await fifo.lock(c, queue.key)
            rows = await c.fetch(sql.RELEASE_SEQS, queue.key, now_ms, int(kind), list(seqs))
            if queue.fifo:
                await fifo.refresh(c, queue.key, (r[0] for r in rows))
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        self.catalogue.notify(queue.key)
        return len(rows)

    async def expire(self, now_ms: int) -> list[Expired]:
        expired: list[Expired] = []
        for queue in self.queues():
            cutoff = now_ms - queue.settings.message_retention_period_s * 1000
            total: int = 0
            while True:
                async with self._db("write", queue) as c:
                    if queue.fifo:
                        n = await self._expire_fifo(c, queue, cutoff)
                    else:
                        n = await c.fetchval(
                            sql.EXPIRE, queue.key, cutoff, CHUNK, random.randrange(SHARDS)
                        )
                total += n
                if n < CHUNK:
                    break
            if total:
                expired.append(Expired(queue.account, queue.name, total))
        while True:
            async with self._db("write") as c:
                status = await c.execute(sql.DEDUP_PRUNE, now_ms, CHUNK)
            if _rowcount(status) < CHUNK:
                break
        return expired

    async def _expire_fifo(self, c: asyncpg.Connection, queue: QueueRecord, cutoff: int) -> int:
        async with c.transaction():
            await fifo.lock(c, queue.key)
            rows = await c.fetch(
                sql.FIFO_EXPIRE, queue.key, cutoff, CHUNK, random.randrange(SHARDS)
            )
            await fifo.refresh(c, queue.key, (r[0] for r in rows))
        return len(rows)

    async def purge(self, queue: QueueRecord, now_ms: int) -> int:
        async with self._db("write", queue) as c:
            last = await c.fetchval(sql.LAST_SEQ, queue.key)
        total: int = 0
        while True:
            async with self._db("write", queue) as c, c.transaction():
                await self._durable(c)
                n = await c.fetchval(
                    sql.PURGE_CHUNK, queue.key, last, CHUNK, random.randrange(SHARDS)
                )
            total += n
            if n < CHUNK:
                break
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            if queue.fifo:  # the groups of what was sent since the purge began, and no ids
                await fifo.lock(c, queue.key)
                await c.execute(sql.DEDUP_CLEAR, queue.key)
                await c.execute(sql.GROUPS_CLEAR, queue.key)
                await c.execute(sql.GROUPS_REBUILD, queue.key)
            await c.execute(sql.MARK_PURGED, now_ms, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        current = self.catalogue.by_key(queue.key)
        if current is not None:
            self.catalogue.remember(dataclasses.replace(current, purged_ms=now_ms))
        return total

    async def peek(self, queue: QueueRecord, now_ms: int, limit: int) -> list[Delivery]:
        async with self._db("read") as c:
            rows = await c.fetch(sql.PEEK, queue.key, now_ms, limit)
        return [
            Delivery(seq, mid, ct, body, sent, att, 0, grp, fseq, dedup, attrs)
            for seq, mid, ct, body, sent, att, grp, fseq, dedup, attrs in rows
        ]

    async def delete_messages(self, queue: QueueRecord, seqs: Sequence[int]) -> int:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            return await self._delete(c, queue, seqs)

    async def _delete(self, c: asyncpg.Connection, queue: QueueRecord, seqs: Sequence[int]) -> int:
        if queue.fifo:
            await fifo.lock(c, queue.key)
            touched = await fifo.delete(c, queue, seqs)
            await fifo.refresh(c, queue.key, touched)
            return len(touched)
        n: int = await c.fetchval(sql.DELETE_SEQS, queue.key, list(seqs), random.randrange(SHARDS))
        return n

    async def backlog(self, queue: QueueRecord) -> Backlog:
        async with self._db("read") as c:
            count, size, oldest = await c.fetchrow(sql.BACKLOG, queue.key)
        self.catalogue.set_count(queue.key, int(count))
        return Backlog(int(count), int(size), oldest or 0)

    def backlog_count(self, queue: QueueRecord) -> int:
        return self.catalogue.count(queue.key)

    async def queue_stats(self, now_ms: int) -> dict[int, NotReady]:
        out: dict[int, NotReady] = {}
        async with self._db("read") as c:
            for q in self.queues():
                not_ready, leased = await c.fetchrow(sql.NOT_READY, q.key, now_ms)
                out[q.key] = NotReady(not_ready, leased)
        return out

    # ---------------------------------------------------------------- wake-ups

    def watch(self, queue: QueueRecord) -> asyncio.Event:
        return self.catalogue.watch(queue)

    # ---------------------------------------------------------------- cron triggers

    async def claim_cron_tick(self, schedule: str, due_ms: int, node: str) -> bool:
        async with self._db("claim cron tick") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(sql.CLAIM_CRON_TICK, schedule, due_ms, node)
        return row is not None

    async def cron_last_ticks(self) -> dict[str, int]:
        async with self._db("read cron ticks") as c:
            rows = await c.fetch(sql.CRON_LAST_TICKS)
        return {str(r["schedule"]): int(r["due_ms"]) for r in rows}

    # ---------------------------------------------------------------- browsing (appended)

    async def browse(self, queue: QueueRecord, now_ms: int, query: BrowseQuery) -> list[Browsed]:
        top = 1 << 62
        after = query.after
        if after is None:
            after_t = (top, top) if query.newest_first else (-1, -1)
        else:
            after_t = (after.sent_ms, after.seq)
        low = query.sent_from_ms if query.sent_from_ms is not None else 0
        high = query.sent_to_ms if query.sent_to_ms is not None else top
        async with self._db("read") as c:
            rows = await c.fetch(
                sql.browse(query.newest_first, query.state),
                queue.key,
                now_ms,
                query.body_bytes,
                after_t[0],
                after_t[1],
                low,
                high,
                query.min_attempts,
                query.limit,
            )
        return [_browsed(r) for r in rows]

    async def message(self, queue: QueueRecord, seq: int, body_bytes: int) -> Browsed | None:
        async with self._db("read") as c:
            row = await c.fetchrow(sql.MESSAGE_BY_SEQ, queue.key, 0, body_bytes, seq)
        return None if row is None else _browsed(row)

    async def search(
        self,
        queue: QueueRecord,
        now_ms: int,
        needle: bytes | None,
        message_id: str | None,
        scan_limit: int,
        limit: int,
        body_bytes: int,
    ) -> Searched:
        async with self._db("read") as c:
            rows = await c.fetch(
                sql.SEARCH, queue.key, now_ms, body_bytes, scan_limit, needle, message_id, limit
            )
            window = await c.fetchval(sql.SEARCH_WINDOW, queue.key, scan_limit)
        return Searched([_browsed(r) for r in rows], int(window))

    async def move_messages(
        self, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        async with self._db("write", source) as c, c.transaction():
            await self._durable(c)
            moved = await self._move(c, source, dest, seqs, now_ms)
        self.catalogue.notify(dest.key)
        return moved

    # ---------------------------------------------------------------- SQS queue extras

    async def queue_extras(self, queue: QueueRecord) -> QueueExtras:
        async with self._db("read") as c:
            row = await c.fetchrow(sql.QUEUE_EXTRAS, queue.key)
        return QueueExtras() if row is None else extras_from_row(row[0], row[1])

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            status = await c.execute(sql.SET_QUEUE_EXTRAS, queue.key, *extras_row(extras))
        if _rowcount(status) == 0:
            raise QueueNotFound(queue.name)

    async def _move(
        self,
        c: asyncpg.Connection,
        source: QueueRecord,
        dest: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
    ) -> int:
        if not self.catalogue.knows(dest.key):  # a move must never turn into a delete
            raise QueueNotFound(dest.name)
        groups: list[str] = []
        if source.fifo or dest.fifo:
            await fifo.lock(c, *[q.key for q in (source, dest) if q.fifo])
        if source.fifo:  # the groups the moved messages leave
            groups = [r[1] for r in await c.fetch(sql.FIFO_INFO, source.key, list(seqs))]
        moved, _ = await self._dead_letter(c, source, seqs, DeadLetter(dest), now_ms)
        if source.fifo:
            await fifo.refresh(c, source.key, groups)
        return moved

    # ---------------------------------------------------------------- bulk move tasks

    async def create_move_task(self, task: MoveTaskRow, now_ms: int) -> None:
        row = move_task_row(dataclasses.replace(task, node=self.node_id))
        async with self._db("create move task") as c, c.transaction():
            await self._durable(c)
            if await c.fetchrow(sql.INSERT_MOVE_TASK, *row) is None:
                raise StoreConflict(
                    f"a redrive of {task.source} is running", "move_task", self.where, "create"
                )
            await c.execute(sql.FORGET_MOVE_TASKS, now_ms - MOVE_TASK_KEPT_MS)

    async def move_tasks(self) -> list[MoveTaskRow]:
        async with self._db("read move tasks") as c:
            rows = await c.fetch(sql.SELECT_MOVE_TASKS)
        return [move_task_from_row(r) for r in rows]

    async def move_task_chunk(
        self,
        task_id: str,
        source: QueueRecord,
        dest: QueueRecord | None,
        seqs: Sequence[int],
        cursor: BrowseCursor | None,
        now_ms: int,
    ) -> MoveTaskRow | None:
        async with self._db("write", source) as c, c.transaction():
            await self._durable(c)
            if not seqs:
                n = 0
            elif dest is None:
                n = await self._delete(c, source, seqs)
            else:
                n = await self._move(c, source, dest, seqs, now_ms)
            at = cursor or (None, None)
            row = await c.fetchrow(sql.MOVE_TASK_PROGRESS, n, at[0], at[1], task_id)
        if dest is not None and n:
            self.catalogue.notify(dest.key)
        return None if row is None else move_task_from_row(row)

    async def set_move_task_state(
        self,
        task_id: str,
        state: str,
        now_ms: int,
        error: str | None = None,
        expect: Sequence[str] = MOVE_ACTIVE,
    ) -> MoveTaskRow | None:
        finished = now_ms if state in MOVE_FINISHED else None
        async with self._db("change move task") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.SET_MOVE_TASK_STATE, state, error, finished, task_id, list(expect)
            )
        return None if row is None else move_task_from_row(row)

    async def adopt_move_tasks(self) -> list[MoveTaskRow]:
        async with self._db("read move tasks") as c:  # asked every few seconds: read first
            if not await c.fetchval(sql.COUNT_ORPHAN_MOVE_TASKS, self.node_id):
                return []
        async with self._db("adopt move tasks") as c, c.transaction():
            await self._durable(c)
            rows = await c.fetch(sql.ADOPT_MOVE_TASKS, self.node_id)
        return [move_task_from_row(r) for r in rows]


def _rowcount(status: str) -> int:
    try:
        return int(status.rsplit(" ", 1)[1])
    except (IndexError, ValueError):
        return 0


def _browsed(r: Any) -> Browsed:
    seq, mid, ct, body, size, sent, vis, att, leased, grp, fseq = r
    return Browsed(seq, mid, ct, bytes(body), size, sent, vis, att, bool(leased), grp, fseq)
