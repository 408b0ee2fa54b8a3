"""The one place where ``sqlite3`` errors become ocd's store errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ocd.errors import StoreConflict, StoreCorrupt, StoreError, StoreFull, StoreUnavailable
from ocd.store.sqlite.space import free_bytes, looks_full, mib


def full_message(where: str) -> str:
    data_dir = Path(where).parent
    return (
        f"the disk is full: no space left on the filesystem of ocd's data directory "
        f"{data_dir} ({mib(free_bytes(data_dir))} free)"
    )


def is_full(e: BaseException, where: str) -> bool:
    """SQLITE_FULL, or an I/O error on a filesystem that has (nearly) no space left:
    SQLite reports ENOSPC from some writes (the shared-memory file, a sync) as SQLITE_IOERR."""
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL or "database or disk is full" in str(e):
        return True
    io = primary == sqlite3.SQLITE_IOERR or "disk I/O error" in str(e)
    return io and looks_full(Path(where).parent)


def is_damage(e: BaseException) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    return primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in str(e)


def translate(e: BaseException, where: str, operation: str) -> StoreError:
    """The ocd error for a driver error met while doing ``operation`` on ``where``."""
    if isinstance(e, StoreError):
        return e
    text = str(e)
    if isinstance(e, sqlite3.IntegrityError) and "UNIQUE" in text:
        return StoreConflict(f"{operation} failed: {text}", "unique", where, operation)
    if is_full(e, where):
        return StoreFull(f"{operation} failed: {full_message(where)}", where, operation)
    if is_damage(e):
        return StoreCorrupt(f"{operation} failed: {where} is damaged: {text}", where, operation)
    if isinstance(e, sqlite3.Error):
        return StoreUnavailable(f"{operation} failed: {text} ({where})", where, operation)
    return StoreError(f"{operation} failed: {e!r}", where, operation)
