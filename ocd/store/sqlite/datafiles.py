"""The data directory's other files in a backup: D1 databases, R2 buckets and Durable Object
storage live beside ``scheduler.sqlite`` as files (``<data_dir>/d1``, ``r2``, ``do``). A
backup stays one file: after the online backup of the queue database, each of those files
is added to a table of the copy (its path relative to the data directory, its mode, its
content in chunks); every SQLite file among them is first copied with the online backup API
itself, so a database written while the backup runs is taken consistent, WAL included."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ocd.errors import SchemaError
from ocd.files import FILE_MODE, new_file, private_dir

# The data directory's subdirectories a backup carries, each written only by ocd or the
# workerd it runs.
DIRS = ("d1", "r2", "do")
TABLE = "ocd_backup_files"
CHUNK_BYTES = 16 * 2**20  # far below SQLite's 1 GB value limit; an R2 object may be 5 GB
_SQLITE_HEADER = b"SQLite format 3\x00"
# A live database's companions: their content is inside the online backup's copy.
_COMPANIONS = ("-wal", "-shm", "-journal")


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


def _files(data_dir: Path) -> Iterator[Path]:
    for top in DIRS:
        root = data_dir / top
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    continue
                base = next((name[: -len(s)] for s in _COMPANIONS if name.endswith(s)), None)
                if base is not None and _is_sqlite(Path(dirpath) / base):
                    continue
                yield path


def add_files(copy: Path, data_dir: Path) -> int:
    """Add the files of ``DIRS`` under ``data_dir`` to the database ``copy``; returns how
    many. A file deleted while the walk runs is left out, as it would be a moment later."""
    out = sqlite3.connect(copy)
    count = 0
    try:
        out.execute(
            f"CREATE TABLE {TABLE} (path TEXT NOT NULL, mode INTEGER NOT NULL, "
            "chunk INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY (path, chunk))"
        )
        with tempfile.TemporaryDirectory(prefix=".ocd-backup-", dir=copy.parent) as tmp:
            for path in _files(data_dir):
                rel = path.relative_to(data_dir).as_posix()
                try:
                    mode = stat.S_IMODE(path.stat().st_mode)
                    source = path
                    if _is_sqlite(path):
                        source = Path(tmp) / "db.sqlite"
                        with contextlib.suppress(FileNotFoundError):
                            source.unlink()
                        _online_copy(path, source)
                    with open(source, "rb") as f:
                        chunk = 0
                        while True:
                            data = f.read(CHUNK_BYTES)
                            if not data and chunk:
                                break
                            out.execute(
                                f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)", (rel, mode, chunk, data)
                            )
                            chunk += 1
                            if len(data) < CHUNK_BYTES:
                                break
                except FileNotFoundError:
                    continue
                count += 1
        out.commit()
    finally:
        out.close()
    return count


def _online_copy(src: Path, dest: Path) -> None:
    new_file(dest)
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    try:
        out = sqlite3.connect(dest)
        try:
            con.backup(out)
            out.execute("PRAGMA journal_mode=DELETE")
        finally:
            out.close()
    finally:
        con.close()


def _safe(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts or p.parts[0] not in DIRS:
        raise SchemaError(f"the backup names a file outside the data directory: {rel!r}")
    return p


def extract(db: sqlite3.Connection, staging: Path) -> bool:
    """Write the files held by the backup ``db`` under ``staging`` (owner-only, whatever the
    modes they had); False if the backup holds none (one made before files were kept)."""
    (exists,) = db.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
    ).fetchone()
    if not exists:
        return False
    private_dir(staging)
    current: tuple[str, int] | None = None
    fd = -1
    try:
        for rel, mode, _chunk, content in db.execute(
            f"SELECT path, mode, chunk, content FROM {TABLE} ORDER BY path, chunk"
        ):
            if current is None or current[0] != rel:
                if fd >= 0:
                    os.close(fd)
                    fd = -1
                target = staging.joinpath(*_safe(rel).parts)
                private_dir(target.parent)
                owner = (mode & 0o700) or FILE_MODE
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                fd = os.open(target, flags, owner)
                os.fchmod(fd, owner)
                current = (rel, mode)
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        if fd >= 0:
            os.close(fd)
    with contextlib.suppress(sqlite3.OperationalError):
        db.execute(f"DROP TABLE {TABLE}")
        db.commit()
        db.execute("VACUUM")
    return True


def put_in_place(staging: Path, data_dir: Path) -> None:
    """Replace ``DIRS`` of ``data_dir`` by those of ``staging``: what was written after the
    backup goes, as the queue database's later messages do."""
    for top in DIRS:
        old = data_dir / top
        if old.exists():
            shutil.rmtree(old)
        new = staging / top
        if new.exists():
            os.replace(new, old)
