"""The one place where ``sqlite3`` errors become ocd's store errors."""

from __future__ import annotations

import sqlite3

from ocd.errors import StoreConflict, StoreCorrupt, StoreError, StoreFull, StoreUnavailable


def translate(e: BaseException, where: str, operation: str) -> StoreError:
    """The ocd error for a driver error met while doing ``operation`` on ``where``."""
    if isinstance(e, StoreError):
        return e
    text = str(e)
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(e, sqlite3.IntegrityError) and "UNIQUE" in text:
        return StoreConflict(f"{operation} failed: {text}", "unique", where, operation)
    if code == sqlite3.SQLITE_FULL or "database or disk is full" in text:
        return StoreFull(f"{operation} failed: the disk is full ({where})", where, operation)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text:
        return StoreCorrupt(f"{operation} failed: {where} is damaged: {text}", where, operation)
    if isinstance(e, sqlite3.Error):
        return StoreUnavailable(f"{operation} failed: {text} ({where})", where, operation)
    return StoreError(f"{operation} failed: {e!r}", where, operation)
