"""The high-water mark: how far ocd knows its database got, kept outside the database and
its WAL (``scheduler.sqlite.mark``).

The database counts its durable commits (a row of ``sqlite_sequence``, see ``sql.py``).
After each such commit is on disk the writer copies the count here with one ``pwrite``, no
sync of its own; the checkpoint loop ``fdatasync``s the file now and then. Whatever version
of this file the disk holds was therefore written after the commit it names was durable:
the mark can lag the database (after a power loss, by up to one sync interval), never lead
it. A database whose count is below the mark has lost commits: its WAL was deleted,
truncated or damaged, or the file was replaced by an older or empty one.

The file holds two 32-byte slots, written alternately, each with the database's identity,
the count and a CRC: a torn write spoils at most the slot being written, and the other,
older one still reads.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"ocdM"
_SLOT = struct.Struct(">4s16sQ")  # magic, database id, durable commits
SLOT_BYTES = _SLOT.size + 4  # + CRC-32 of the above
SLOTS = 2


@dataclass(frozen=True, slots=True)
class Mark:
    database_id: bytes  # 16 random bytes, made with the database (meta ``database_id``)
    commits: int  # durable commits the database had when this was written


def mark_path(db: Path) -> Path:
    return db.with_name(db.name + ".mark")


def _pack(mark: Mark) -> bytes:
    head = _SLOT.pack(MAGIC, mark.database_id, mark.commits)
    return head + struct.pack(">I", zlib.crc32(head))


def _unpack(raw: bytes) -> Mark | None:
    if len(raw) < SLOT_BYTES:
        return None
    head, (crc,) = raw[: _SLOT.size], struct.unpack(">I", raw[_SLOT.size : SLOT_BYTES])
    if zlib.crc32(head) != crc:
        return None
    magic, database_id, commits = _SLOT.unpack(head)
    return Mark(database_id, commits) if magic == MAGIC else None


class Unreadable(Exception):
    """The mark file exists but holds no valid slot."""


def read_mark(path: Path) -> Mark | None:
    """The newest valid slot; None when there is no mark file. Raises ``Unreadable`` for a
    file with no valid slot, ``OSError`` when it cannot be read."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    slots = [_unpack(raw[i * SLOT_BYTES : (i + 1) * SLOT_BYTES]) for i in range(SLOTS)]
    valid = [m for m in slots if m is not None]
    if not valid:
        raise Unreadable(f"{path} holds no valid mark ({len(raw)} bytes)")
    return max(valid, key=lambda m: m.commits)


class MarkFile:
    """The mark of one open database; ``advance`` after each durable commit."""

    def __init__(self, path: Path, mark: Mark) -> None:
        """Start the file afresh at ``mark`` (both slots), durably, before any commit."""
        self.path = path
        self.database_id = mark.database_id
        self.commits = mark.commits
        self._synced = mark.commits
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            data = _pack(mark)
            os.pwrite(self._fd, data * SLOTS, 0)
            os.ftruncate(self._fd, SLOT_BYTES * SLOTS)
            os.fsync(self._fd)
            _sync_dir(path.parent)
        except BaseException:
            os.close(self._fd)
            raise

    def advance(self, commits: int) -> None:
        """Record that the database durably has ``commits`` commits: one pwrite into the page
        cache, which a kill -9 does not lose. Called by the one writer, never concurrently."""
        if commits <= self.commits:
            return
        self.commits = commits
        slot = commits % SLOTS
        os.pwrite(self._fd, _pack(Mark(self.database_id, commits)), slot * SLOT_BYTES)

    def sync(self) -> None:
        """Put the latest ``advance`` on disk, so that it survives a power loss too."""
        target = self.commits
        if target != self._synced:
            os.fdatasync(self._fd)
            self._synced = target

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sync()
        os.close(self._fd)


def remove_mark(db: Path) -> None:
    """Forget the mark (a restore replaces the database on purpose)."""
    with contextlib.suppress(FileNotFoundError):
        mark_path(db).unlink()
    _sync_dir(db.parent)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
