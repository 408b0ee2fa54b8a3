"""The SQLite backend: ``scheduler.sqlite`` in the data directory.

The group-committing writer lives in ``writer.py``. Callers queue operations and await a future;
the writer runs everything pending in one transaction (group commit), commits, then
resolves each caller. Reads that only inform scheduling (``ready``, oldest timestamp) use a
second connection, which WAL lets run beside the writer.

The process owns the database file (an exclusive ``flock`` on ``scheduler.sqlite`` itself), so
at open every push lease left by a crash is returned at once instead of waiting it out.
Before anything is written, ``guard`` checks read-only that the file is ocd's and holds at
least what the high-water mark (``mark``) says was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from ocd.errors import (
    QueueNotFound,
    SchemaError,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)
from ocd.store.base import (
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
from ocd.store.sqlite import fifo, guard, sql
from ocd.store.sqlite.errors import is_damage, is_full, translate
from ocd.store.sqlite.mark import Mark, MarkFile, mark_path
from ocd.store.sqlite.space import DEFAULT_RESERVE_BYTES, Space, full_advice
from ocd.store.sqlite.writer import (
    Call,
    Enqueue,
    Op,
    Tx,
    Writer,
    chunks,
    fetch_all,
    fetch_one,
    marks,
    read_all,
    read_one,
)

log = logging.getLogger(__name__)

SEARCH_MATCH_CAP = 2_000  # past this many matches a search walks down from the newest

DB_NAME = "scheduler.sqlite"
CHECKPOINT_EVERY_S = 0.5
# Past this size the writer checkpoints between two groups so that the WAL starts over, and
# SQLite then truncates the file back to it (journal_size_limit). The most: at open it is
# sized down to a quarter of the disk reserve (``ocd.store.sqlite.space``), so that a full
# disk's reserve can always take a checkpoint.
WAL_LIMIT_BYTES = 64 * 2**20


class SqliteStore:
    def __init__(
        self,
        data_dir: Path,
        durability: Literal["full", "normal"] = "full",
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
        disk_reserve_bytes: int = DEFAULT_RESERVE_BYTES,
        accept_data_loss: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.path = data_dir / DB_NAME
        self.where = str(self.path)
        # One node owns the file (the lock), so its id only names it in logs.
        self.node_id = secrets.token_hex(8)
        self.durability = durability
        self.wal_limit_bytes = wal_limit_bytes  # the most; sized down by the disk at open
        self.space = Space(data_dir, disk_reserve_bytes, wal_limit_bytes)
        self._checkpoint_failing = False
        # Start on a database older than its high-water mark, saying so (``guard.judge``).
        self.accept_data_loss = accept_data_loss
        self._lock_fd: int | None = None
        self._mark: MarkFile | None = None
        self._final_commits = 0  # durable commits when the writer closed
        self._r: aiosqlite.Connection | None = None
        self.catalogue = Catalogue()
        self._writer: Writer | None = None
        self._ckpt: aiosqlite.Connection | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._closing = False
        # for metrics: the operations in each commit, and whether it ran on the event loop
        self.on_commit: Callable[[int, bool], None] | None = None

    # ---------------------------------------------------------------- lifecycle

    async def open(self, now_ms: int) -> None:
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot use data directory {self.data_dir}: {e.strerror}") from e
        existed = self.path.exists()
        self._lock_fd = guard.lock(self.path)
        reserve_existed = self.space.path.exists()
        try:
            # The reserve first: on a disk that is full already, even a read-only look
            # needs room (for the shared-memory file).
            self.space.at_open()
            found = guard.look(self.path, self._lock_fd, existed)
            guard.judge(self.path, found, self.accept_data_loss)
        except BaseException:
            if not existed:  # leave no empty file where there was none
                with contextlib.suppress(OSError):
                    self.path.unlink()
            if not reserve_existed:  # nor a reserve this refused start made
                self.space.forget()
            self._unlock()
            raise
        self.wal_limit_bytes = self.space.wal_limit()
        self._writer = Writer(
            self.path,
            self.durability,
            self._refresh_oldest,
            self._committed,
            refuse=self._refusal,
            on_error=self._store_error,
        )
        self._writer.wal_limit = self.wal_limit_bytes
        try:
            await self._connect(now_ms)
        except BaseException:
            await self._close_connections()
            self._unlock()
            raise
        self._writer.start()
        self._checkpointer = asyncio.create_task(
            self._checkpoint_loop(), name="ocd-store-checkpoint"
        )

    async def _checkpoint_loop(self) -> None:
        """Copy the WAL back into the database on a connection of its own, so that a commit
        never pays for a checkpoint (SQLite's default runs one inside the commit that
        crosses 1000 pages, stalling every send waiting on it).

        Under steady writes that checkpoint never catches up with the writer, and SQLite
        starts the WAL over only once every frame is copied: the file grew by about 4 MB/s
        of pushes, without end. So when it passes ``wal_limit_bytes``, the writer itself
        checkpoints between two groups, where no write is under way; that finishes what the
        checkpoint here left (a short pause), and the next commit starts the WAL over."""
        assert self._ckpt is not None and self._writer is not None
        wal = Path(f"{self.path}-wal")
        while True:
            await asyncio.sleep(CHECKPOINT_EVERY_S)
            try:
                commits = self._writer.durable_commits
                rows = await self._ckpt.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
                if self.space.full is not None:
                    # Give the WAL's space back to the disk, then look for room again.
                    await self._writer.checkpoint(truncate=True)
                    self.space.try_resume()
                elif _size(wal) > self.wal_limit_bytes:
                    await self._writer.checkpoint()
            except (sqlite3.Error, StoreError) as e:  # busy or I/O: the next round tries again
                err = translate(e, self.where, "WAL checkpoint")
                self._store_error(err)
                if not self._checkpoint_failing:  # once per episode, not every half second
                    log.warning("WAL checkpoint failed (retrying): %s", err)
                self._checkpoint_failing = True
                continue
            if self._checkpoint_failing:
                log.info("WAL checkpoints work again")
            self._checkpoint_failing = False
            await self._sync_mark(commits, list(rows))

    async def _sync_mark(self, commits: int, checkpointed: list[Any]) -> None:
        """Put the high-water mark on disk. With durability "full" the writer advances it
        after each durable commit; with "normal" no commit is synced, so it advances here,
        to the commits made before a checkpoint that copied the whole WAL (SQLite syncs the
        WAL before a checkpoint and the database after a complete one)."""
        if self._mark is None:
            return
        if self.durability != "full" and checkpointed:
            busy, frames, copied = checkpointed[0]
            if busy == 0 and frames == copied:
                self._advance_mark(commits)
        try:
            await asyncio.to_thread(self._mark.sync)
        except OSError as e:
            log.warning("could not sync the high-water mark: %s", e)

    def full(self) -> str | None:
        """While the disk is full and sends are refused: why, naming where; else None."""
        return self.space.full

    def _refusal(self) -> StoreError | None:
        reason = self.space.full
        return None if reason is None else StoreFull(reason, self.where, "send")

    def _store_error(self, err: StoreError) -> None:
        if isinstance(err, StoreFull):
            self.space.enter(err.operation or "a write")

    async def _connect(self, now_ms: int) -> None:
        assert self._writer is not None
        sync = "FULL" if self.durability == "full" else "NORMAL"
        try:
            await self._writer.connect(
                (
                    "PRAGMA journal_mode=WAL",
                    f"PRAGMA synchronous={sync}",
                    "PRAGMA busy_timeout=5000",
                    "PRAGMA temp_store=MEMORY",
                    # Checkpoints run beside the writer (_checkpoint_loop), not inside a commit.
                    "PRAGMA wal_autocheckpoint=0",
                    f"PRAGMA journal_size_limit={self.wal_limit_bytes}",
                )
            )
            if self.space.full is None:  # not into the room kept for acks
                self._preallocate_wal()
            mark: Mark = await self._writer.call(self._prepare, now_ms)
            self._r = await aiosqlite.connect(self.path, isolation_level=None)
            await self._r.execute("PRAGMA busy_timeout=5000")
            await self._r.execute("PRAGMA query_only=1")
            self._ckpt = await aiosqlite.connect(self.path, isolation_level=None)
            await self._ckpt.execute("PRAGMA busy_timeout=5000")
        except sqlite3.DatabaseError as e:
            err = translate(e, self.where, "open")
            # Only damage calls for a backup; I/O, permissions and a full disk say so.
            cls = (
                StoreCorrupt
                if isinstance(err, StoreCorrupt)
                else StoreFull
                if isinstance(err, StoreFull)
                else StoreUnavailable
            )
            raise cls(self._open_advice(e), self.where, "open") from e
        self._start_mark(mark)

    def _open_advice(self, e: sqlite3.DatabaseError) -> str:
        """What an error at open means and what to do: only damage calls for a backup."""
        if is_full(e, self.where):
            return full_advice(self.path, self.data_dir)
        if is_damage(e):
            return (
                f"cannot open {self.path}: {e}. The file is damaged: move it aside and "
                "restore a backup (ocd restore)"
            )
        return (
            f"cannot open {self.path}: {e}. This is an I/O or access error, not damage to "
            "the database: check the disk, its free space and the file's permissions, then "
            "start ocd again; do not restore a backup for it"
        )

    def _start_mark(self, mark: Mark) -> None:
        """Start the high-water mark at what the database holds, once that is on disk."""
        assert self._writer is not None and self._lock_fd is not None
        path = mark_path(self.path)
        try:
            os.fsync(self._lock_fd)  # the database file itself
            wal = Path(f"{self.path}-wal")
            if wal.exists():
                fd = os.open(wal, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._mark = MarkFile(path, mark)
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e.strerror}", str(path), "open") from e
        self._writer.count_commits(mark.commits, self._mark)

    def _preallocate_wal(self) -> None:
        """Give an empty WAL its full size in zeros before the first commit, as PostgreSQL
        does with its WAL segments.

        A commit that appends to the file makes fdatasync write the file's new size and
        blocks too, an ext4 journal commit on top of the data; one that overwrites blocks
        already written syncs only the data. Measured here with 13-row commits and
        synchronous=FULL: about 400 µs a commit while the WAL grows, 250 µs once it is
        written. SQLite reads a WAL whose header is zeros as empty, writes its header and
        frames from the start, and after a checkpoint starts over from the start again
        (journal_size_limit keeps the file at ``wal_limit_bytes``). Only an empty or
        missing WAL is filled: one with frames in it is a crash's, for SQLite to recover.
        Without room on the disk the WAL is left empty and grows as it would anyway."""
        wal = Path(f"{self.path}-wal")
        if _size(wal) != 0:
            return
        zeros = bytes(2**20)
        try:
            fd = os.open(wal, os.O_WRONLY | os.O_CREAT, os.stat(self.path).st_mode & 0o777)
        except OSError as e:
            log.warning("could not create the WAL to preallocate it: %s", e)
            return
        try:
            for _ in range(-(-self.wal_limit_bytes // len(zeros))):
                os.write(fd, zeros)
            os.fsync(fd)
        except OSError as e:
            log.warning("could not preallocate the WAL (%s); it grows as it is written", e)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def _prepare(self, conn: sqlite3.Connection, now_ms: int) -> Mark:
        """Check, migrate and load the database, and return crashed push leases; on the
        writer's thread, before anything else runs. Returns the database's identity and
        durable commits, for the high-water mark."""
        self._check_integrity(conn)
        self._migrate(conn)
        mark = self._identify(conn)
        self._load(conn)
        self._recover(conn, now_ms)
        return mark

    def _identify(self, conn: sqlite3.Connection) -> Mark:
        """The database's identity and commit count, made on first use (a new database, or
        one from before the high-water mark)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(sql.PUT_DATABASE_ID)
            (database_id,) = fetch_one(conn, sql.GET_META, (sql.DATABASE_ID_KEY,))
            row = fetch_one(conn, sql.GET_COMMITS)
            if row is None:
                conn.execute(sql.START_COMMITS)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return Mark(bytes(database_id), int(row[0]) if row is not None else 0)

    def _check_integrity(self, conn: sqlite3.Connection) -> None:
        (result,) = fetch_one(conn, "PRAGMA quick_check")
        if result != "ok":
            raise SchemaError(
                f"{self.path} is damaged (integrity check: {result}). ocd will not run on it, "
                "so that nothing more is lost: move it aside and restore a backup "
                "(ocd restore), or salvage it with: sqlite3 scheduler.sqlite .recover"
            )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        (app_id,) = fetch_one(conn, "PRAGMA application_id")
        (version,) = fetch_one(conn, "PRAGMA user_version")
        (tables,) = fetch_one(conn, "SELECT count(*) FROM sqlite_master")
        if app_id not in (0, sql.APPLICATION_ID) or (app_id == 0 and tables > 0):
            raise SchemaError(f"{self.path} is not an ocd database")
        latest = len(sql.MIGRATIONS)
        if version > latest:
            raise SchemaError(
                f"{self.path} has schema version {version}, newer than this ocd "
                f"understands ({latest}); run a newer ocd or restore an older backup"
            )
        for target in range(version + 1, latest + 1):
            # One script, one transaction: a crash mid-migration leaves the old version.
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{sql.MIGRATIONS[target - 1]}\n"
                f"PRAGMA user_version={target};\n"
                f"PRAGMA application_id={sql.APPLICATION_ID};\nCOMMIT;"
            )
            log.info("database %s migrated to schema %d", self.path, target)

    def _load(self, conn: sqlite3.Connection) -> None:
        for row in fetch_all(conn, sql.SELECT_QUEUES):
            self.catalogue.remember(queue_from_row(row))
        for row in fetch_all(conn, sql.SELECT_CONSUMERS):
            self.catalogue.put_consumer(consumer_from_row(row))
        for key, count, size, oldest in fetch_all(conn, sql.COUNT_BY_QUEUE):
            self.catalogue.set_counts(key, count, size, oldest)

    def _recover(self, conn: sqlite3.Connection, now_ms: int) -> None:
        rows = fetch_all(conn, sql.RECOVER_PUSH_LEASES, (now_ms, int(LeaseKind.PUSH)))
        groups: dict[int, set[str]] = {}
        for key, grp in rows:
            if grp is not None:
                groups.setdefault(key, set()).add(grp)
        tx = Tx(conn)
        for key, gs in groups.items():
            fifo.refresh(tx, key, gs)
        if rows:
            log.warning(
                "returned %d message(s) that were in flight when ocd last stopped",
                len(rows),
                extra={"event": "inflight_recovered", "count": len(rows)},
            )

    def available(self) -> bool:
        return self._writer is not None and not self._closing

    def background(self) -> list[asyncio.Task[Any]]:
        tasks = [self._checkpointer] if self._checkpointer is not None else []
        if self._writer is not None:
            tasks += self._writer.background()
        return tasks

    async def close(self) -> None:
        self._closing = True
        await self._close_connections()
        if self._mark is not None:
            commits = self._final_commits
            # With durability "normal" the commits are on disk once the last connection's
            # checkpoint has copied the whole WAL into the database and removed it.
            if self.durability == "full" or not Path(f"{self.path}-wal").exists():
                self._advance_mark(commits)
            with contextlib.suppress(OSError):
                self._mark.close()
            self._mark = None
        self._unlock()

    def _advance_mark(self, commits: int) -> None:
        assert self._mark is not None
        try:
            self._mark.advance(commits)
        except OSError as e:
            log.warning("could not update the high-water mark: %s", e)

    async def _close_connections(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpointer
            self._checkpointer = None
        if self._ckpt is not None:
            with contextlib.suppress(Exception):
                await self._ckpt.close()
            self._ckpt = None
        if self._r is not None:
            with contextlib.suppress(Exception):
                await self._r.close()
            self._r = None
        if self._writer is not None:
            await self._writer.close()
            self._final_commits = self._writer.durable_commits  # pending groups included
            self._writer = None

    def _unlock(self) -> None:
        if self._mark is not None:  # a failed open
            with contextlib.suppress(OSError):
                self._mark.close()
            self._mark = None
        if self._lock_fd is not None:
            guard.unlock(self._lock_fd)
            self._lock_fd = None

    # ---------------------------------------------------------------- the writer

    async def _submit(self, op: Op) -> Any:
        if self._closing or self._writer is None:
            raise StoreError("the store is closed")
        return await self._writer.submit(op)

    @property
    def commits(self) -> int:
        return self._writer.commits if self._writer is not None else 0

    def _refresh_oldest(self, tx: Tx) -> None:
        """Keep every queue's oldest timestamp known, so that a send's reply and a batch's
        metrics need no read of their own: one indexed lookup per queue per group."""
        cat = self.catalogue
        stale = tx.oldest_dirty | {k for k in tx.oldest_new if cat.oldest(k) is None}
        for key in stale:
            (found,) = fetch_one(tx.conn, sql.OLDEST, (key,))
            tx.oldest_known[key] = found or 0

    def _committed(self, tx: Tx, ops: list[Op]) -> None:
        if self.on_commit is not None:
            self.on_commit(len(ops), tx.on_loop)
        cat = self.catalogue
        for key, (count, size) in tx.delta.items():
            cat.add(key, count, size)
        for key, oldest_ms in tx.oldest_known.items():
            cat.set_oldest(key, oldest_ms)
        for key, sent_ms in tx.oldest_new.items():
            if key not in tx.oldest_known:
                prev = cat.oldest(key)  # 0: the queue was empty
                cat.set_oldest(key, min(prev, sent_ms) if prev else sent_ms)
        for key in tx.notify:
            cat.notify(key)

    # ---------------------------------------------------------------- queues

    def queue_by_id(self, queue_id: str) -> QueueRecord | None:
        return self.catalogue.queue_by_id(queue_id)

    def queues(self) -> list[QueueRecord]:
        return self.catalogue.queues()

    def queue(self, name: str, account: str = "local") -> QueueRecord | None:
        return self.catalogue.queue(name, account)

    async def lookup(self, name: str, account: str = "local") -> QueueRecord | None:
        return self.catalogue.queue(name, account)  # one node: the catalogue is the truth

    async def lookup_by_id(self, queue_id: str) -> QueueRecord | None:
        return self.catalogue.queue_by_id(queue_id)

    async def create_queue(
        self, name: str, account: str, settings: QueueSettings, now_ms: int
    ) -> QueueRecord:
        def insert(tx: Tx) -> QueueRecord:
            row = (account, name, secrets.token_hex(16), now_ms, now_ms, *settings_row(settings))
            if not fetch_all(tx.conn, sql.INSERT_QUEUE + " RETURNING key", row):
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "create"
                )
            return queue_from_row(fetch_one(tx.conn, sql.SELECT_QUEUE, (account, name)))

        record: QueueRecord = await self._submit(Call(insert))
        self.catalogue.remember(record)
        return record

    async def ensure_queue(
        self, name: str, account: str, settings: QueueSettings | None, now_ms: int
    ) -> QueueRecord:
        existing = self.queue(name, account)
        if existing is not None and (settings is None or settings == existing.settings):
            return existing
        if existing is not None:
            assert settings is not None
            return await self.update_queue(existing, settings, now_ms)
        s = settings or QueueSettings()

        def insert(tx: Tx) -> QueueRecord:
            # Two creates of one name may share a group: the second finds the first's row.
            tx.conn.execute(
                sql.INSERT_QUEUE,
                (account, name, secrets.token_hex(16), now_ms, now_ms, *settings_row(s)),
            )
            return queue_from_row(fetch_one(tx.conn, sql.SELECT_QUEUE, (account, name)))

        record: QueueRecord = await self._submit(Call(insert))
        self.catalogue.remember(record)
        return record

    async def update_queue(
        self, queue: QueueRecord, settings: QueueSettings, now_ms: int, new_name: str | None = None
    ) -> QueueRecord:
        name = new_name or queue.name

        def update(tx: Tx) -> None:
            try:
                cur = tx.conn.execute(
                    sql.UPDATE_QUEUE, (name, now_ms, *settings_row(settings), queue.key)
                )
            except sqlite3.IntegrityError:
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "rename"
                ) from None
            if cur.rowcount == 0:
                raise QueueNotFound(queue.name)
            tx.notify.add(queue.key)

        await self._submit(Call(update))
        # From the record as it is now, not the caller's copy: a purge or another update
        # may have landed meanwhile.
        current = self.catalogue.by_key(queue.key) or queue
        record = dataclasses.replace(current, name=name, modified_ms=now_ms, settings=settings)
        self.catalogue.remember(record)
        return record

    async def delete_queue(self, queue: QueueRecord) -> None:
        def delete(tx: Tx) -> None:
            tx.conn.execute(sql.DELETE_QUEUE_MESSAGES, (queue.key,))
            fifo.purge(tx, queue.key)
            tx.conn.execute(sql.DELETE_CONSUMER, (queue.key,))
            tx.conn.execute(sql.DELETE_QUEUE, (queue.key,))

        await self._submit(Call(delete))
        self.catalogue.forget(queue)

    # ---------------------------------------------------------------- pull consumers

    def pull_consumer(self, queue: QueueRecord) -> PullConsumer | None:
        return self.catalogue.pull_consumer(queue)

    async def put_pull_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        """Create the queue's pull consumer, or update its settings (id and creation stay)."""

        def put(tx: Tx) -> PullConsumer:
            rows = fetch_all(
                tx.conn,
                sql.UPSERT_CONSUMER,
                (
                    queue.key,
                    consumer.consumer_id,
                    consumer.created_ms,
                    consumer.dead_letter_queue,
                    consumer_settings(consumer),
                ),
            )
            _key, cid, created = rows[0]
            return dataclasses.replace(
                consumer, queue_key=queue.key, consumer_id=cid, created_ms=created
            )

        stored: PullConsumer = await self._submit(Call(put))
        self.catalogue.put_consumer(stored)
        return stored

    async def delete_pull_consumer(self, queue: QueueRecord) -> bool:
        def delete(tx: Tx) -> int:
            cur = tx.conn.execute(sql.DELETE_CONSUMER, (queue.key,))
            return max(cur.rowcount, 0)

        deleted: int = await self._submit(Call(delete))
        self.catalogue.drop_consumer(queue)
        return deleted > 0

    async def secret(self, name: str) -> bytes:
        """A random key kept in the database (created on first use), e.g. to sign leases."""

        def get(tx: Tx) -> bytes:
            tx.conn.execute(sql.PUT_META, (name, secrets.token_bytes(32)))
            (value,) = fetch_one(tx.conn, sql.GET_META, (name,))
            return bytes(value)

        value: bytes = await self._submit(Call(get))
        return value

    # ---------------------------------------------------------------- messages

    async def enqueue(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> Backlog:
        # Straight to the writer, and the backlog from memory when it is known: every
        # coroutine layer here is paid by every send.
        if self._closing or self._writer is None:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if self.space.full is not None:  # refused up front: the room left is for acks
            raise StoreFull(self.space.full, self.where, "send")
        if queue.fifo:
            backlog, _ = await self.enqueue_fifo(queue, messages)
            return backlog
        await self._writer.submit(Enqueue(queue, messages))
        known = self.catalogue.backlog(queue.key)
        return known if known is not None else await self.backlog(queue)

    async def enqueue_fifo(
        self, queue: QueueRecord, messages: Sequence[NewMessage]
    ) -> tuple[Backlog, list[FifoSent]]:
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if self.space.full is not None:
            raise StoreFull(self.space.full, self.where, "send")
        sent: list[FifoSent] = await self._submit(
            Call(fifo.enqueue, queue, messages, most_rows=2 * len(messages), grows=True)
        )
        known = self.catalogue.backlog(queue.key)
        return (known if known is not None else await self.backlog(queue)), sent

    async def ready(self, queue: QueueRecord, now_ms: int, limit: int) -> Ready:
        assert self._r is not None
        try:
            count, first, nxt = await read_one(
                self._r,
                sql.READY_FIFO if queue.fifo else sql.READY,
                {"q": queue.key, "now": now_ms, "n": limit},
            )
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
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

        def claim(tx: Tx) -> Claimed:
            if max_batches is not None:
                (held,) = fetch_one(tx.conn, sql.PUSH_LEASES_HELD, (queue.key, now_ms))
                if held >= max_batches:
                    return Claimed([])
            if queue.fifo:
                return self._claim_fifo(
                    tx, queue, limit, now_ms, lease_until_ms, lease, kind, max_attempts, dead_letter
                )
            rows = fetch_all(
                tx.conn,
                sql.CLAIM,
                {
                    "q": queue.key,
                    "now": now_ms,
                    "n": limit,
                    "until": lease_until_ms,
                    "lease": lease,
                    "kind": int(kind),
                },
            )
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
                self._dead_letter(tx, queue, spent, dead_letter, now_ms)
            deliveries.sort(key=lambda d: d.seq)
            return Claimed(deliveries, exhausted)

        result: Claimed = await self._submit(Call(claim, durable=False, most_rows=limit))
        return result

    def _claim_fifo(
        self,
        tx: Tx,
        queue: QueueRecord,
        limit: int,
        now_ms: int,
        until_ms: int,
        lease: int,
        kind: LeaseKind,
        max_attempts: int,
        dead_letter: DeadLetter,
    ) -> Claimed:
        deliveries: list[Delivery] = []
        spent: list[int] = []
        exhausted: list[str] = []
        groups: set[str] = set()
        for row in fifo.claim(tx, queue, limit, now_ms, until_ms, lease, int(kind)):
            if row[5] > max_attempts:
                spent.append(row[0])
                exhausted.append(row[1])
                groups.add(row[6])
            else:
                deliveries.append(fifo.delivery(row, lease))
        if spent:
            self._dead_letter(tx, queue, spent, dead_letter, now_ms)
            fifo.refresh(tx, queue.key, groups)
        return Claimed(deliveries, exhausted)

    def _settle_fifo(
        self,
        tx: Tx,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        retries, dead, back, groups = fifo.hold_back(tx, queue, set(acks), retries, dead)
        acked = self._delete(tx, queue, acks, groups)
        retried = 0
        if retries:
            cur = tx.conn.executemany(
                sql.RETRY, ((visible, seq, queue.key) for seq, visible in retries)
            )
            retried = max(cur.rowcount, 0)
        if back:
            fifo.release_any(tx, queue, back, now_ms)
        moved, deleted = self._dead_letter(tx, queue, dead, dead_letter, now_ms, groups)
        fifo.refresh(tx, queue.key, groups)
        if retries or back or moved:
            tx.notify.add(queue.key)
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
        def settle(tx: Tx) -> Settled:
            if queue.fifo:
                return self._settle_fifo(tx, queue, acks, retries, dead, dead_letter, now_ms)
            acked = self._delete(tx, queue, acks)
            retried = 0
            if retries:
                cur = tx.conn.executemany(
                    sql.RETRY, ((visible, seq, queue.key) for seq, visible in retries)
                )
                retried = max(cur.rowcount, 0)
                tx.notify.add(queue.key)
            moved, deleted = self._dead_letter(tx, queue, dead, dead_letter, now_ms)
            return Settled(acked, retried, moved, deleted)

        most_rows = len(acks) + len(retries) + len(dead)
        result: Settled = await self._submit(Call(settle, durable=False, most_rows=most_rows))
        return result

    def _delete(
        self, tx: Tx, queue: QueueRecord, seqs: Sequence[int], groups: set[str] | None = None
    ) -> int:
        """Delete messages by seq; a FIFO queue's groups are refreshed, or added to
        ``groups`` for the caller to refresh."""
        n = 0
        touched: set[str] = set()
        for chunk in chunks(seqs):
            rows = fetch_all(
                tx.conn, sql.DELETE_SEQS.format(marks=marks(len(chunk))), (queue.key, *chunk)
            )
            if rows:
                tx.removed(queue.key, len(rows), sum(r[0] for r in rows))
                if queue.fifo:
                    touched.update(r[1] for r in rows)
            n += len(rows)
        if touched:
            if groups is not None:
                groups |= touched
            else:
                fifo.refresh(tx, queue.key, touched)
        return n

    def _dead_letter(
        self,
        tx: Tx,
        queue: QueueRecord,
        seqs: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
        groups: set[str] | None = None,
    ) -> tuple[int, int]:
        """Move exhausted messages to the dead-letter queue, or delete them. The groups of
        a FIFO queue's messages are the caller's to refresh."""
        if not seqs:
            return 0, 0
        dlq = dead_letter.queue
        if dlq is None or not self.catalogue.knows(dlq.key):
            return 0, self._delete(tx, queue, seqs, groups if groups is not None else set())
        if dlq.fifo and queue.fifo:
            return fifo.move(tx, queue, seqs, dlq, now_ms), 0
        moved = 0
        for chunk in chunks(seqs):
            rows = fetch_all(
                tx.conn,
                sql.MOVE_SEQS.format(marks=marks(len(chunk))),
                (dlq.key, now_ms, queue.key, *chunk),
            )
            if rows:
                size = sum(r[0] for r in rows)
                tx.removed(queue.key, len(rows), size)
                tx.added(dlq.key, len(rows), size, min(r[1] for r in rows))
            moved += len(rows)
        return moved, 0

    async def release(
        self,
        queue: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
        kind: LeaseKind = LeaseKind.PUSH,
    ) -> int:
        def release(tx: Tx) -> int:
            n = 0
            groups: set[str] = set()
            for chunk in chunks(seqs):
                rows = fetch_all(
                    tx.conn,
                    sql.RELEASE_SEQS.format(marks=marks(len(chunk))),
                    (now_ms, int(kind), queue.key, *chunk),
                )
                n += len(rows)
                if queue.fifo:
                    groups.update(r[0] for r in rows)
            if groups:
                fifo.refresh(tx, queue.key, groups)
            tx.notify.add(queue.key)
            return n

        result: int = await self._submit(Call(release, durable=False))
        return result

    async def expire(self, now_ms: int, batch: int = 5000) -> list[Expired]:
        expired: list[Expired] = []
        for queue in self.queues():
            cutoff = now_ms - queue.settings.message_retention_period_s * 1000

            def expire(tx: Tx, q: QueueRecord = queue, cutoff: int = cutoff) -> int:
                rows = fetch_all(tx.conn, sql.EXPIRE, (q.key, cutoff, batch))
                if rows:
                    tx.removed(q.key, len(rows), sum(r[0] for r in rows))
                    if q.fifo:
                        fifo.refresh(tx, q.key, (r[1] for r in rows))
                return len(rows)

            total = 0
            while True:
                n: int = await self._submit(Call(expire, durable=False))
                total += n
                if n < batch:
                    break
            if total:
                expired.append(Expired(queue.account, queue.name, total))
        while await self._submit(Call(fifo.prune_dedup, now_ms, batch, durable=False)) >= batch:
            pass
        return expired

    async def purge(self, queue: QueueRecord, now_ms: int) -> int:
        def purge(tx: Tx) -> int:
            cur = tx.conn.execute(sql.DELETE_QUEUE_MESSAGES, (queue.key,))
            fifo.purge(tx, queue.key)
            tx.conn.execute(sql.MARK_PURGED, (now_ms, queue.key))
            n = max(cur.rowcount, 0)
            tx.removed(queue.key, *self.catalogue.counts(queue.key))
            return n

        result: int = await self._submit(Call(purge))
        current = self.catalogue.by_key(queue.key)
        if current is not None:
            self.catalogue.remember(dataclasses.replace(current, purged_ms=now_ms))
        return result

    async def peek(self, queue: QueueRecord, now_ms: int, limit: int) -> list[Delivery]:
        """Ready messages, oldest first, without leasing them or counting an attempt."""
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.PEEK, (queue.key, now_ms, limit))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return [
            Delivery(seq, mid, ct, body, sent, att, 0, grp, fseq, dedup, attrs)
            for seq, mid, ct, body, sent, att, grp, fseq, dedup, attrs in rows
        ]

    async def delete_messages(self, queue: QueueRecord, seqs: Sequence[int]) -> int:
        def delete(tx: Tx) -> int:
            return self._delete(tx, queue, seqs)

        result: int = await self._submit(Call(delete))
        return result

    async def queue_stats(self, now_ms: int) -> dict[int, NotReady]:
        assert self._r is not None
        out: dict[int, NotReady] = {}
        try:
            for q in self.queues():
                not_ready, leased = await read_one(self._r, sql.NOT_READY, (q.key, now_ms))
                out[q.key] = NotReady(not_ready, leased)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return out

    def backlog_count(self, queue: QueueRecord) -> int:
        return self.catalogue.count(queue.key)

    async def backlog(self, queue: QueueRecord) -> Backlog:
        known = self.catalogue.backlog(queue.key)
        if known is not None:
            return known
        assert self._r is not None
        try:
            (found,) = await read_one(self._r, sql.OLDEST, (queue.key,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        oldest = found or 0
        self.catalogue.set_oldest(queue.key, oldest)
        count, size = self.catalogue.counts(queue.key)
        return Backlog(count, size, oldest)

    # ---------------------------------------------------------------- wake-ups

    def watch(self, queue: QueueRecord) -> asyncio.Event:
        """An event set at the next commit that may make messages of ``queue`` ready."""
        return self.catalogue.watch(queue)

    # ---------------------------------------------------------------- browsing (appended)

    async def browse(self, queue: QueueRecord, now_ms: int, query: BrowseQuery) -> list[Browsed]:
        top = 1 << 62
        after = query.after
        if after is None:
            after_t = (top, top) if query.newest_first else (-1, -1)
        else:
            after_t = (after.sent_ms, after.seq)
        params = {
            "q": queue.key,
            "now": now_ms,
            "b": query.body_bytes,
            "cs": after_t[0],
            "cq": after_t[1],
            "from": query.sent_from_ms if query.sent_from_ms is not None else 0,
            "to": query.sent_to_ms if query.sent_to_ms is not None else top,
            "att": query.min_attempts,
            "n": query.limit,
        }
        return await self._browsed(sql.browse(query.newest_first, query.state), params)

    async def message(self, queue: QueueRecord, seq: int, body_bytes: int) -> Browsed | None:
        params = {"q": queue.key, "seq": seq, "b": body_bytes, "now": 0}
        rows = await self._browsed(sql.MESSAGE_BY_SEQ, params)
        return rows[0] if rows else None

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
        assert self._r is not None
        try:
            bound = await read_one(
                self._r, sql.SEARCH_BOUND, {"q": queue.key, "skip": scan_limit - 1}
            )
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        # Fewer messages than the limit: the window is the whole queue (its count is known).
        window = scan_limit if bound is not None else self.backlog_count(queue)
        params = {
            "q": queue.key,
            "now": now_ms,
            "b": body_bytes,
            "since": bound[0] if bound is not None else 0,
            "needle": needle,
            "id": message_id,
            "n": limit,
            "cap": SEARCH_MATCH_CAP,
        }
        try:
            seqs = [seq for (seq,) in await read_all(self._r, sql.SEARCH_SEQS, params)]
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        if len(seqs) >= SEARCH_MATCH_CAP:  # plenty of matches: the newest, from the top
            rows = await self._browsed(sql.SEARCH, params)
        else:
            newest = seqs[-limit:] if limit else []
            marks_ = ", ".join(f":s{i}" for i in range(len(newest)))
            by_seq = {f"s{i}": seq for i, seq in enumerate(newest)}
            statement = sql.SEARCH_ROWS.format(marks=marks_)
            rows = await self._browsed(statement, {**params, **by_seq}) if newest else []
        return Searched(rows, int(window))

    async def _browsed(self, statement: str, params: dict[str, Any]) -> list[Browsed]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, statement, params)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return [
            Browsed(seq, mid, ct, bytes(body), size, sent, vis, att, bool(leased), grp, fseq)
            for seq, mid, ct, body, size, sent, vis, att, leased, grp, fseq in rows
        ]

    async def move_messages(
        self, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        def move(tx: Tx) -> int:
            return self._move(tx, source, dest, seqs, now_ms)

        result: int = await self._submit(Call(move, most_rows=len(seqs)))
        return result

    # ---------------------------------------------------------------- SQS queue extras

    async def queue_extras(self, queue: QueueRecord) -> QueueExtras:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.QUEUE_EXTRAS, (queue.key,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return extras_from_row(*rows[0]) if rows else QueueExtras()

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        def put(tx: Tx) -> None:
            cur = tx.conn.execute(sql.SET_QUEUE_EXTRAS, (*extras_row(extras), queue.key))
            if cur.rowcount == 0:
                raise QueueNotFound(queue.name)

        await self._submit(Call(put))

    def _move(
        self, tx: Tx, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        if not self.catalogue.knows(dest.key):  # a move must never turn into a delete
            raise QueueNotFound(dest.name)
        groups: set[str] = set()
        if source.fifo:  # the groups the moved messages leave
            for chunk in chunks(seqs):
                groups.update(
                    r[1]
                    for r in fetch_all(
                        tx.conn,
                        sql.FIFO_INFO.format(marks=marks(len(chunk))),
                        (source.key, *chunk),
                    )
                    if r[1] is not None
                )
        moved, _ = self._dead_letter(tx, source, seqs, DeadLetter(dest), now_ms, groups)
        fifo.refresh(tx, source.key, groups)
        return moved

    # ---------------------------------------------------------------- cron triggers

    async def claim_cron_tick(self, schedule: str, due_ms: int, node: str) -> bool:
        def claim(tx: Tx) -> bool:
            return bool(fetch_all(tx.conn, sql.CLAIM_CRON_TICK, (schedule, due_ms, node)))

        claimed: bool = await self._submit(Call(claim))
        return claimed

    async def cron_last_ticks(self) -> dict[str, int]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.CRON_LAST_TICKS, ())
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return {str(name): int(due) for name, due in rows}

    # ---------------------------------------------------------------- the clock's mark

    async def clock_mark(self) -> int:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.GET_META, (CLOCK_MARK_KEY,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return mark_from_bytes(rows[0][0] if rows else None)

    async def save_clock_mark(self, now_ms: int) -> None:
        def save(tx: Tx) -> None:
            tx.conn.execute(sql.RAISE_META, (CLOCK_MARK_KEY, mark_to_bytes(now_ms)))

        # Not durable by itself: the next durable commit (a send) syncs it.
        await self._submit(Call(save, durable=False))

    # ---------------------------------------------------------------- bulk move tasks

    async def create_move_task(self, task: MoveTaskRow, now_ms: int) -> None:
        row = move_task_row(dataclasses.replace(task, node=self.node_id))

        def insert(tx: Tx) -> None:
            if not fetch_all(tx.conn, sql.INSERT_MOVE_TASK, row):
                raise StoreConflict(
                    f"a redrive of {task.source} is running", "move_task", self.where, "create"
                )
            tx.conn.execute(sql.FORGET_MOVE_TASKS, (now_ms - MOVE_TASK_KEPT_MS,))

        await self._submit(Call(insert))

    async def move_tasks(self) -> list[MoveTaskRow]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.SELECT_MOVE_TASKS, ())
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
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
        def chunk(tx: Tx) -> MoveTaskRow | None:
            if dest is None:
                n = self._delete(tx, source, seqs)
            else:
                n = self._move(tx, source, dest, seqs, now_ms) if seqs else 0
            c = cursor or (None, None)
            rows = fetch_all(tx.conn, sql.MOVE_TASK_PROGRESS, (n, c[0], c[1], task_id))
            return move_task_from_row(rows[0]) if rows else None

        result: MoveTaskRow | None = await self._submit(Call(chunk, most_rows=len(seqs)))
        return result

    async def set_move_task_state(
        self,
        task_id: str,
        state: str,
        now_ms: int,
        error: str | None = None,
        expect: Sequence[str] = MOVE_ACTIVE,
    ) -> MoveTaskRow | None:
        finished = now_ms if state in MOVE_FINISHED else None
        statement = sql.SET_MOVE_TASK_STATE.format(marks=marks(len(expect)))

        def change(tx: Tx) -> MoveTaskRow | None:
            rows = fetch_all(tx.conn, statement, (state, error, finished, task_id, *expect))
            return move_task_from_row(rows[0]) if rows else None

        result: MoveTaskRow | None = await self._submit(Call(change))
        return result

    async def adopt_move_tasks(self) -> list[MoveTaskRow]:
        assert self._r is not None
        try:  # a read first: asked every few seconds, this must not cost a commit each time
            (orphans,) = await read_one(self._r, sql.COUNT_ORPHAN_MOVE_TASKS, (self.node_id,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        if not orphans:
            return []

        def adopt(tx: Tx) -> list[MoveTaskRow]:
            rows = fetch_all(tx.conn, sql.ADOPT_MOVE_TASKS, (self.node_id, self.node_id))
            return [move_task_from_row(r) for r in rows]

        result: list[MoveTaskRow] = await self._submit(Call(adopt))
        return result


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
