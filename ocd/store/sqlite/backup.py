"""Backups of a data directory: a consistent copy of a live ``scheduler.sqlite`` (SQLite's
online backup API, no stop needed) holding the directory's D1, R2 and Durable Object files
too (``datafiles``), and putting one back while ocd is stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from ocd.errors import SchemaError, StoreError, StoreLockedError
from ocd.files import new_file, private_dir
from ocd.store.sqlite import datafiles, guard, sql
from ocd.store.sqlite.mark import remove_mark
from ocd.store.sqlite.store import DB_NAME


def backup(data_dir: Path, dest: Path) -> int:
    """Copy the database in ``data_dir``, and its files of ``datafiles.DIRS``, to ``dest``
    (a new file); returns its size.

    Works beside a running daemon: the queue database's copy is one read transaction, so
    it holds exactly the messages committed when it began; each other SQLite file is
    copied the same way, a moment later.
    """
    src_path = data_dir / DB_NAME
    if not src_path.is_file():
        raise StoreError(f"no database at {src_path}")
    if dest.exists():
        raise StoreError(f"{dest} exists; refusing to overwrite it")
    tmp = dest.with_name(dest.name + ".partial")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a copy a kill -9 cut short
    try:
        # The copy holds every message body and the dashboard's keys: as private as the
        # database from its first byte, never a file SQLite creates with the umask's mode.
        new_file(tmp)
        src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True, timeout=30)
        try:
            out = sqlite3.connect(tmp)
            try:
                src.backup(out)  # all pages in one step: one consistent snapshot
                out.execute("PRAGMA journal_mode=DELETE")
            finally:
                out.close()
        finally:
            src.close()
        datafiles.add_files(tmp, data_dir)
        _check(tmp)
        os.replace(tmp, dest)
    except sqlite3.Error as e:
        raise StoreError(f"backup of {src_path} failed: {e}") from e
    except OSError as e:
        raise StoreError(f"cannot write {tmp}: {e.strerror}") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest.stat().st_size


def restore(src: Path, data_dir: Path) -> None:
    """Put the backup ``src`` in place as ``data_dir``'s database, and its files back
    under ``data_dir`` (``datafiles``), replacing what is there. ocd must be stopped:
    the database file's lock is taken for the duration. The high-water mark is removed:
    going back to the backup is the loss of what came after it, accepted."""
    if not src.is_file():
        raise StoreError(f"no backup at {src}")
    try:
        _check(src)
    except sqlite3.Error as e:
        raise SchemaError(f"{src} is not a usable ocd backup: {e}") from e
    private_dir(data_dir)
    target = data_dir / DB_NAME
    try:
        fd = guard.lock(target)
    except StoreLockedError:
        raise StoreLockedError(f"ocd is running on {data_dir}; stop it before restoring") from None
    try:
        tmp = data_dir / (DB_NAME + ".restoring")
        staging = data_dir / ".restoring"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        shutil.rmtree(staging, ignore_errors=True)  # what a kill -9 cut short
        try:
            new_file(tmp)
            con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
            out = sqlite3.connect(tmp)
            try:
                con.backup(out)
                has_files = datafiles.extract(out, staging)
            finally:
                out.close()
                con.close()
        except (sqlite3.Error, OSError, SchemaError) as e:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(e, SchemaError):
                raise
            raise StoreError(f"restore from {src} failed: {e}") from e
        if has_files:
            datafiles.put_in_place(staging, data_dir)
        shutil.rmtree(staging, ignore_errors=True)
        # The old database's WAL belongs to it, not to the restored file.
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (data_dir / (DB_NAME + suffix)).unlink()
        remove_mark(target)
        os.replace(tmp, target)
    finally:
        guard.unlock(fd)


def _check(path: Path) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (app_id,) = con.execute("PRAGMA application_id").fetchone()
        (version,) = con.execute("PRAGMA user_version").fetchone()
        (ok,) = con.execute("PRAGMA quick_check").fetchone()
    finally:
        con.close()
    if app_id != sql.APPLICATION_ID:
        raise SchemaError(f"{path} is not an ocd database")
    if version > len(sql.MIGRATIONS):
        raise SchemaError(f"{path} has schema version {version}, newer than this ocd")
    if ok != "ok":
        raise SchemaError(f"{path} failed its integrity check: {ok}")
