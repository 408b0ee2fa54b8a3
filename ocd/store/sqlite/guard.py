"""What ocd checks before it writes to ``scheduler.sqlite``: that no other ocd runs on it
(a lock on the database file itself), that the file is ocd's, and that it holds at least
what the high-water mark (``mark.py``) says ocd committed to it.

Everything here reads the file without changing it: a foreign database is refused as it
was found, and a database refused as older than the mark keeps its WAL as it was (a
read-only connection never checkpoints), so that nothing that could still be salvaged is
overwritten.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from ocd.errors import (
    SchemaError,
    StoreBehind,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLockedError,
    StoreUnavailable,
)
from ocd.store.sqlite import sql
from ocd.store.sqlite.errors import is_full, translate
from ocd.store.sqlite.mark import Mark, Unreadable, mark_path, read_mark
from ocd.store.sqlite.space import full_advice

log = logging.getLogger(__name__)

SQLITE_HEADER = b"SQLite format 3\x00"
ACCEPT = "ocd serve --accept-data-loss"

# (st_dev, st_ino) of each database file this process holds the lock of. A second open of
# the same file in one process is refused here, before it opens (and, failing, closes) a
# descriptor of the file: closing any descriptor of a file drops every POSIX lock the
# process holds on it, SQLite's own included.
_locked: set[tuple[int, int]] = set()


def lock(db: Path) -> int:
    """An exclusive ``flock`` on the database file itself (created empty if missing), held
    until ``unlock``: deleting some other file cannot let a second daemon in. SQLite locks
    with POSIX byte-range locks, which on Linux ignore a ``flock``, so ``ocd backup`` and
    other readers still read beside it."""
    for _ in range(3):
        try:
            st = os.stat(db)
            if (st.st_dev, st.st_ino) in _locked:
                raise StoreLockedError(_in_use(db), str(db), "lock")
        except FileNotFoundError:
            pass
        try:
            fd = os.open(db, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise StoreError(f"cannot open {db}: {e.strerror}", str(db), "lock") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(_in_use(db), str(db), "lock") from None
        # The path must still name the file locked: a restore renames a new one into place.
        mine = os.fstat(fd)
        try:
            now = os.stat(db)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            _locked.add((mine.st_dev, mine.st_ino))
            return fd
        os.close(fd)
    raise StoreError(f"{db} keeps being replaced while ocd opens it", str(db), "lock")


def unlock(fd: int) -> None:
    st = os.fstat(fd)
    _locked.discard((st.st_dev, st.st_ino))
    os.close(fd)


def _in_use(db: Path) -> str:
    return (
        f"{db} is in use by another ocd process (it holds the lock on the file); "
        "stop it or use another data_dir"
    )


@dataclass(frozen=True, slots=True)
class Found:
    """What a read-only look at the database file found."""

    kind: Literal["missing", "empty", "ocd"]  # empty: 0 bytes, or SQLite with no tables
    size: int  # bytes of scheduler.sqlite
    wal_size: int | None  # bytes of scheduler.sqlite-wal; None: there is none
    database_id: bytes | None = None  # None: an ocd database from before the mark
    commits: int = 0


def look(db: Path, fd: int, existed: bool) -> Found:
    """Classify the database file (``fd``: the locked descriptor; ``existed``: whether the
    file was there before ``lock`` made it) without changing it; raises ``StoreCorrupt``
    for a file that is not a SQLite database or not ocd's."""
    wal_size = _size(Path(f"{db}-wal"))
    size = os.fstat(fd).st_size
    if size == 0:
        return Found("empty" if existed else "missing", 0, wal_size)
    header = os.pread(fd, 100, 0)
    if not header.startswith(SQLITE_HEADER):
        raise StoreCorrupt(
            f"{db} is not a SQLite database (its first bytes are not SQLite's header): the "
            "file is damaged or is some other file. ocd will not run on it: move it aside "
            "and restore a backup (ocd restore)",
            str(db),
            "open",
        )
    header_app_id = int.from_bytes(header[68:72], "big")
    if header_app_id not in (0, sql.APPLICATION_ID):  # foreign: not even opened by SQLite
        raise _foreign(db, header_app_id, "not read")
    try:
        con = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as e:
        raise _unreadable(db, e) from e
    try:
        (app_id,) = con.execute("PRAGMA application_id").fetchone()
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id != sql.APPLICATION_ID:
            if app_id == 0 and not tables:
                return Found("empty", size, wal_size)
            raise _foreign(db, app_id, ", ".join(sorted(tables)[:5]) or "none")
        database_id = None
        if "meta" in tables:
            row = con.execute(sql.GET_META, (sql.DATABASE_ID_KEY,)).fetchone()
            database_id = bytes(row[0]) if row is not None else None
        commits = 0
        if "sqlite_sequence" in tables:
            row = con.execute(sql.GET_COMMITS).fetchone()
            commits = int(row[0]) if row is not None else 0
    except sqlite3.Error as e:
        raise _unreadable(db, e) from e
    finally:
        con.close()
    return Found("ocd", size, wal_size, database_id, commits)


def _foreign(db: Path, app_id: int, tables: str) -> SchemaError:
    return SchemaError(
        f"{db} is not an ocd database (application_id {app_id:#x}, tables: {tables}); "
        "ocd has not changed it. Point data_dir at a directory of ocd's own",
        str(db),
        "open",
    )


def _unreadable(db: Path, e: sqlite3.Error) -> StoreError:
    err = translate(e, str(db), "open")
    if isinstance(err, StoreCorrupt):
        return StoreCorrupt(
            f"cannot read {db}: {e}. The file is damaged; ocd will not run on it, so that "
            "nothing more is lost: move it aside and restore a backup (ocd restore), or "
            "salvage it with: sqlite3 scheduler.sqlite .recover",
            str(db),
            "open",
        )
    if isinstance(err, StoreFull) or is_full(e, str(db)):
        return StoreFull(full_advice(db, db.parent), str(db), "open")
    # Not damage (permissions, I/O): a backup would not help.
    cls = StoreUnavailable
    return cls(
        f"cannot read {db}: {e} (the file itself is not known to be damaged; "
        "check the disk and the file's permissions)",
        str(db),
        "open",
    )


def judge(db: Path, found: Found, accept_data_loss: bool) -> None:
    """Refuse (``StoreBehind``) a database older than the mark, unless the loss is
    accepted: then say so loudly, and the caller starts the mark over."""
    path = mark_path(db)
    try:
        mark = read_mark(path)
    except (Unreadable, OSError) as e:
        log.warning(
            "the high-water mark cannot be read (%s); it starts over from the database",
            e,
            extra={"event": "mark_unreadable", "path": str(path)},
        )
        return
    if mark is None:
        return
    missing = _missing(db, found, mark)
    if missing is None:
        return
    if accept_data_loss:
        log.error(
            "%s. Starting anyway, as --accept-data-loss asks: what is missing is lost, and "
            "the high-water mark starts over from what the database holds",
            missing,
            extra={
                "event": "data_loss_accepted",
                "path": str(db),
                "mark": mark.commits,
                "database": found.commits,
            },
        )
        return
    raise StoreBehind(
        f"{missing}. ocd will not run on it, so that nothing more is lost. Put the original "
        "files back if you have them, or restore a backup (ocd restore); to run on what "
        f"the database holds and accept the loss, start once with `{ACCEPT}`",
        mark.commits - found.commits if found.database_id == mark.database_id else None,
        str(db),
        "open",
    )


def _missing(db: Path, found: Found, mark: Mark) -> str | None:
    """What is missing from the database by the mark, as a sentence; None: nothing."""
    had = f"but ocd had committed {mark.commits} change(s) to it"
    wal = f"WAL ({db.name}-wal, {_wal_state(found)}) was deleted, truncated or damaged"
    if found.kind == "missing":
        return f"{db} is missing, {had}: it was deleted or moved"
    if found.kind == "empty" and found.size == 0:
        return f"{db} is empty (0 bytes), {had}: it was truncated or replaced by an empty file"
    if found.kind == "empty":
        return f"{db} holds no tables, {had}: its {wal}, or it was replaced by an empty file"
    if found.database_id != mark.database_id:
        return (
            f"{db} is not the database ocd last ran on here (the high-water mark "
            f"{mark_path(db)} names another): it was replaced by another or an older file"
        )
    if found.commits >= mark.commits:
        return None
    return (
        f"{db} is older than what ocd committed to it: it holds {found.commits} of "
        f"{mark.commits} commits, {mark.commits - found.commits} commit(s) are missing. "
        f"Its {wal}, or the database was replaced by an older copy"
    )


def _wal_state(found: Found) -> str:
    return "missing" if found.wal_size is None else f"now {found.wal_size} bytes"


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
