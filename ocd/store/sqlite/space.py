"""Disk space for the SQLite backend: a full disk is an operating state, not a crash.

A disk that fills must not stop consumers from draining it: pulls, acks and retries are
writes too (SQLite appends every change to the WAL), and a WAL can only start over after a
checkpoint has copied it into the database file, which may have to grow for that. So ocd
keeps a *reserve*: a preallocated file in the data directory (``[server] disk_reserve``,
at most an eighth of the filesystem). When SQLite reports the disk full the reserve is
deleted, new sends are refused up front (without attempting the write), and everything
else (claims, acks, retries, checkpoints) runs in the room the reserve left. The WAL is
kept at most a quarter of the reserve between checkpoints (``wal_limit``), so that this room always
suffices to finish a checkpoint and truncate the WAL. Once the filesystem has room for the
reserve and a full WAL again, the reserve is written back and sends are accepted again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

RESERVE_NAME = "scheduler.sqlite.reserve"
DEFAULT_RESERVE_BYTES = 64 * 2**20
MIN_WAL_BYTES = 2**20  # the smallest WAL limit sized from the disk
LOW_FREE_BYTES = 2 * 2**20  # an I/O error with less than this free is the disk being full
RESUME_MARGIN_BYTES = 2**20  # room beyond the reserve and a full WAL before sends resume


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``path``'s filesystem."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def total_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def looks_full(path: Path) -> bool:
    """Whether ``path``'s filesystem is (nearly) out of space: SQLite reports some writes
    that fail for lack of space as a plain I/O error (a shared-memory file that cannot
    grow, a sync of data the filesystem could not place)."""
    free = free_bytes(path)
    return free is not None and free < LOW_FREE_BYTES


def mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MiB"


class Space:
    """The reserve file and whether the disk is full; every method runs on the event loop
    and takes microseconds (statvfs, unlink, fallocate)."""

    def __init__(self, data_dir: Path, reserve_bytes: int, wal_max_bytes: int) -> None:
        self.data_dir = data_dir
        self.path = data_dir / RESERVE_NAME
        self.configured = max(0, reserve_bytes)
        self.wal_max = wal_max_bytes
        self.full: str | None = None  # why sends are refused now
        self.full_since: float | None = None

    def reserve_size(self) -> int:
        total = total_bytes(self.data_dir) or 0
        size = min(self.configured, total // 8) if total else self.configured
        return size - size % 4096

    def wal_limit(self) -> int:
        """The WAL's size between checkpoints: at most a quarter of the reserve (see the module
        docstring), without a reserve an eighth of the free space; never above the
        configured maximum, and not below ``MIN_WAL_BYTES`` unless that maximum is."""
        reserve = self.reserve_size()
        if reserve:
            derived = reserve // 4
        else:
            derived = (free_bytes(self.data_dir) or self.wal_max * 8) // 8
        return min(self.wal_max, max(MIN_WAL_BYTES, derived))

    def message(self) -> str:
        return (
            f"the disk is full: no space left on the filesystem of ocd's data directory "
            f"{self.data_dir} ({mib(free_bytes(self.data_dir))} free); new messages are "
            "refused until space is freed there (pulls, acks and retries still work)"
        )

    def at_open(self) -> None:
        """Before the database opens: hold the reserve, or, on a disk that is full
        already, release it so that the open and then acks have room."""
        if not self.configured:
            self._release()
            return
        # Not held again into the last room of a disk that filled before this start.
        size = self._holdable()
        if size is not None and self._hold(size):
            return
        self.enter("at start")

    def enter(self, why: str) -> None:
        """The disk is full: release the reserve, refuse sends; logged once."""
        if self.full is not None:
            return
        self.full = self.message()  # before the release: the free space as it was
        self._release()
        self.full_since = time.monotonic()
        log.error(
            "%s (%s); the reserve of %s is released for pulls and acks",
            self.full,
            why,
            mib(self.reserve_size()),
            extra={"event": "store_full", "where": str(self.data_dir)},
        )

    def try_resume(self) -> bool:
        """While full: whether there is room again, and if so hold the reserve again and
        accept sends; logged once."""
        if self.full is None:
            return False
        size = self._holdable()
        if size is None or not self._hold(size):
            return False
        since = self.full_since or time.monotonic()
        self.full = None
        self.full_since = None
        log.warning(
            "disk space is back on the filesystem of %s (%s free): sends are accepted "
            "again, after %.0f s full",
            self.data_dir,
            mib(free_bytes(self.data_dir)),
            time.monotonic() - since,
            extra={"event": "store_space_back", "where": str(self.data_dir)},
        )
        return True

    def _holdable(self) -> int | None:
        """The reserve's size if there is room for all of it beside a WAL at its limit and
        a margin; else None: sends stay refused. Not part of it: a WAL that a checkpoint
        has just truncated gives back room it needs again (counting that as space back
        would make sends flap between accepted and refused under load), and acks free
        pages inside the database file, for new sends to reuse, not on the disk."""
        want = self.reserve_size()
        free = (free_bytes(self.data_dir) or 0) + _size(self.path)  # the reserve's own room
        margin = max(RESUME_MARGIN_BYTES, want // 4)
        return want if free >= want + self.wal_limit() + margin else None

    def _hold(self, size: int) -> bool:
        if not size:
            self._release()
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as e:
            log.warning("cannot create the disk reserve %s: %s", self.path, e.strerror)
            return False
        try:
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
            else:
                _allocate(fd, size)
                os.fsync(fd)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                log.warning("cannot write the disk reserve %s: %s", self.path, e.strerror)
            os.close(fd)
            self._release()
            return False
        os.close(fd)
        return True

    def forget(self) -> None:
        """Give the reserve back for good: a start that was refused leaves no file behind
        that it made."""
        self._release()

    def _release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _allocate(fd: int, size: int) -> None:
    """Blocks for ``size`` bytes, really allocated (not a sparse file)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    zeros = bytes(2**20)
    os.lseek(fd, 0, os.SEEK_SET)
    left = size
    while left > 0:
        left -= os.write(fd, zeros[: min(left, len(zeros))])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def full_advice(db: Path, data_dir: Path) -> str:
    """What to say when ``db`` cannot be opened because its disk is full: not damage."""
    return (
        f"cannot open {db}: the disk is full ({mib(free_bytes(data_dir))} free on the "
        f"filesystem of {data_dir}). The database is not damaged: free some space there (or "
        "grow the volume) and start ocd again; do not restore a backup"
    )
