"""The one place where asyncpg's errors become ocd's store errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import asyncpg

from ocd.errors import (
    OcdError,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)

# SQLSTATE classes: 08 connection, 57P shutdown/crash, 53 insufficient resources
_UNAVAILABLE_STATES = ("08", "57P", "53300", "40001", "40P01", "55P03", "58")


def translate(e: BaseException, where: str, operation: str) -> StoreError:
    """The ocd error for a driver error met while doing ``operation`` on ``where``."""
    if isinstance(e, StoreError):
        return e
    if isinstance(e, asyncpg.UniqueViolationError):
        return StoreConflict(f"{operation} failed: {e}", "unique", where, operation)
    if isinstance(e, asyncpg.ForeignKeyViolationError):
        return StoreConflict(f"{operation} failed: {e}", "foreign_key", where, operation)
    if isinstance(e, asyncpg.PostgresError):
        state = e.sqlstate or ""
        if state.startswith("53") and state != "53300":  # disk full, out of memory
            return StoreFull(f"{operation} failed: {e} ({where})", where, operation)
        if state.startswith("XX"):
            return StoreCorrupt(f"{operation} failed: {e} ({where})", where, operation)
        if state.startswith(_UNAVAILABLE_STATES):
            return StoreUnavailable(
                f"{operation} failed: the database is unavailable: {e} ({where})", where, operation
            )
        return StoreError(f"{operation} failed: {e} ({where})", where, operation)
    if isinstance(
        e,
        (
            OSError,
            asyncpg.InterfaceError,
            # a connection the server closed mid-operation, still in use: drop it
            asyncpg.InternalClientError,
            asyncio.TimeoutError,
            ConnectionError,
        ),
    ):
        return StoreUnavailable(
            f"{operation} failed: cannot reach the database ({where}): {e or type(e).__name__}",
            where,
            operation,
        )
    return StoreError(f"{operation} failed: {e!r}", where, operation)


def is_driver_error(e: BaseException) -> bool:
    return isinstance(
        e,
        (
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
            asyncio.TimeoutError,
        ),
    )


@contextlib.contextmanager
def translating(where: str, operation: str) -> Iterator[None]:
    """Driver errors raised inside become ocd's store errors; ocd's own and anything else
    (a bug) pass through as they are."""
    try:
        yield
    except OcdError:
        raise
    except Exception as e:
        if not is_driver_error(e):
            raise
        raise translate(e, where, operation) from e
