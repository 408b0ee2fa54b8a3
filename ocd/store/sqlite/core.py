"""The SQLite backend's core: the file, its lock and high-water mark, the writer and the
read connection, opening (guard, migrations, recovery), checkpoints and closing; the
Lifecycle facet. The other facets (``queues``, ``messages``, ``browse``, ``moves``,
``coordination``) build on it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from ocd.errors import (
    SchemaError,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)
from ocd.files import private_dir
from ocd.store.catalogue import Catalogue
from ocd.store.rows import (
    consumer_from_row,
    queue_from_row,
)
from ocd.store.sqlite import fifo, guard, layout, sql
from ocd.store.sqlite.errors import is_damage, is_full, translate
from ocd.store.sqlite.mark import Mark, MarkFile, mark_path
from ocd.store.sqlite.ops import Op, Tx, fetch_all, fetch_one
from ocd.store.sqlite.space import DEFAULT_RESERVE_BYTES, Space, full_advice
from ocd.store.sqlite.writer import Writer
from ocd.store.values import LeaseKind

log = logging.getLogger(__name__)

DB_NAME = "scheduler.sqlite"
CHECKPOINT_EVERY_S = 0.5
# Quiet commits (``Op.quiet``: the clock's mark) that wake the waiting checkpoint loop once:
# at one every ten seconds (``ocd.clock.MARK_EVERY_S``), once a minute on an idle daemon.
QUIET_COMMITS = 6
# Past this size the writer checkpoints between two groups so that the WAL starts over, and
# SQLite then truncates the file back to it (journal_size_limit). The most: at open it is
# sized down to a quarter of the disk reserve (``ocd.store.sqlite.space``), so that a full
# disk's reserve can always take a checkpoint.
WAL_LIMIT_BYTES = 64 * 2**20


class SqliteCore:
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
        self._quick: sqlite3.Connection | None = None  # short reads on the loop (_quick_one)
        self.catalogue = Catalogue()
        self._writer: Writer | None = None
        self._ckpt: aiosqlite.Connection | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        # The checkpoint loop's rounds, and whether it waits for a commit (status, tests)
        self.checkpoint_rounds = 0
        self.checkpoint_idle = False
        # Wakes the waiting checkpoint loop: set by every commit and when the disk fills
        self._checkpoint_wake = asyncio.Event()
        self._quiet_commits = 0  # since the loop was last woken
        self._closing = False
        # for metrics: the operations in each commit, and whether it ran on the event loop
        self.on_commit: Callable[[int, bool], None] | None = None

    async def open(self, now_ms: int) -> None:
        try:
            private_dir(self.data_dir)
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
        checkpoint here left (a short pause), and the next commit starts the WAL over.

        After a round that copied the whole WAL and synced the mark, the loop has nothing
        to do until the next commit, and waits for one (``checkpoint_idle``) instead of
        waking every half second: a round costs a hop to each of two threads and a stat of
        the WAL, the most of what an idle daemon did. Quiet commits (the clock's mark) wake
        it only every ``QUIET_COMMITS``. A disk that fills wakes it too: while full, every
        round looks for room again, with or without commits."""
        assert self._ckpt is not None and self._writer is not None
        wal = Path(f"{self.path}-wal")
        done_at: int | None = None  # the writer's commits when a round left nothing to do
        while True:
            await asyncio.sleep(CHECKPOINT_EVERY_S)
            seen = self._writer.commits
            if seen == done_at and self.space.full is None:
                self._checkpoint_wake.clear()  # no await since the look: nothing missed
                self.checkpoint_idle = True
                try:
                    await self._checkpoint_wake.wait()
                finally:
                    self.checkpoint_idle = False
                continue
            done_at = None
            self.checkpoint_rounds += 1
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
            checkpointed = list(rows)
            if await self._sync_mark(commits, checkpointed) and _copied_all(checkpointed):
                done_at = seen

    async def _sync_mark(self, commits: int, checkpointed: list[Any]) -> bool:
        """Put the high-water mark on disk. With durability "full" the writer advances it
        after each durable commit; with "normal" no commit is synced, so it advances here,
        to the commits made before a checkpoint that copied the whole WAL (SQLite syncs the
        WAL before a checkpoint and the database after a complete one). Whether the mark
        is on disk (or there is none)."""
        if self._mark is None:
            return True
        if self.durability != "full" and _copied_all(checkpointed):
            self._advance_mark(commits)
        try:
            await asyncio.to_thread(self._mark.sync)
        except OSError as e:
            log.warning("could not sync the high-water mark: %s", e)
            return False
        return True

    def full(self) -> str | None:
        """While the disk is full and sends are refused: why, naming where; else None."""
        return self.space.full

    def _refusal(self) -> StoreError | None:
        reason = self.space.full
        return None if reason is None else StoreFull(reason, self.where, "send")

    def _quick_one(self, statement: str, params: Any) -> Any | None:
        """A short read of one row on the event loop's own thread, while the disk is fast
        (the writer commits small groups there then): a dispatcher's look at its queue,
        where the read connection's thread cost several times the query, in hand-overs of
        the GIL and wake-ups of the loop. None if not now (a slow disk, or the database
        busy for a moment: a checkpoint starting the WAL over): read through ``_r``."""
        rows = self._quick_rows(statement, params)
        return rows[0] if rows else None

    def _quick_rows(self, statement: str, params: Any) -> list[Any] | None:
        """``_quick_one``'s read, every row; None if not now."""
        if self._quick is None or self._writer is None or not self._writer.inline_now():
            return None
        try:
            # every row read: the statement ends, and its snapshot with it (a snapshot left
            # open would keep a checkpoint from starting the WAL over)
            return self._quick.execute(statement, params).fetchall()
        except sqlite3.OperationalError:
            return None

    def _store_error(self, err: StoreError) -> None:
        if isinstance(err, StoreFull):
            self.space.enter(err.operation or "a write")
            self._checkpoint_wake.set()  # the checkpoint loop looks for room again

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
                    # Debian's SQLite zeroes every deleted page by default: an ack of a
                    # large message rewrote its overflow pages, doubling the bytes that
                    # draining a queue writes (and needs on a full disk). FAST zeroes only
                    # what costs no extra write.
                    "PRAGMA secure_delete=FAST",
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
            # busy_timeout 0: a read that would wait is not made on the loop (_quick_one)
            self._quick = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
            self._quick.execute("PRAGMA query_only=1")
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
        already written syncs only the data, which is cheaper. SQLite reads a WAL whose
        header is zeros as empty, writes its header and frames from the start, and after a
        checkpoint starts over from the start again (journal_size_limit keeps the file at
        ``wal_limit_bytes``). Only an empty or
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
        """Messages a crash left leased to a push dispatcher become ready now, their attempt
        counted, so that a message that crashes the daemon cannot loop for ever. One
        transaction: a crash here leaves them as they were."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            tx = Tx(conn)
            returned = layout.hand_back(tx, int(LeaseKind.PUSH), now_ms)
            rows = fetch_all(conn, sql.RECOVER_PUSH_LEASES, (now_ms, int(LeaseKind.PUSH)))
            groups: dict[int, set[str]] = {}
            for key, grp in rows:
                if grp is not None:
                    groups.setdefault(key, set()).add(grp)
            for key, gs in groups.items():
                fifo.refresh(tx, key, gs)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        returned += len(rows)
        if returned:
            log.warning(
                "returned %d message(s) that were in flight when ocd last stopped",
                returned,
                extra={"event": "inflight_recovered", "count": returned},
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
        if self._quick is not None:
            with contextlib.suppress(Exception):
                self._quick.close()
            self._quick = None
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
        if tx.wrote:  # a commit that changed no row put nothing in the WAL to copy
            self._wake_checkpoints(ops)
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

    def _wake_checkpoints(self, ops: list[Op]) -> None:
        """Wake the waiting checkpoint loop after a commit that wrote: at once, or after
        QUIET_COMMITS of them if every operation was quiet (``Op.quiet``)."""
        if all(op.quiet for op in ops) and self._quiet_commits < QUIET_COMMITS - 1:
            self._quiet_commits += 1
            return
        self._quiet_commits = 0
        self._checkpoint_wake.set()


def _copied_all(checkpointed: list[Any]) -> bool:
    """Whether a ``PRAGMA wal_checkpoint``'s row says it copied every frame of the WAL."""
    if not checkpointed:
        return False
    busy, frames, copied = checkpointed[0]
    return bool(busy == 0 and frames == copied)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
