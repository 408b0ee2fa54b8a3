"""One D1 database: a SQLite file of its own, queried with the worker's own SQL.

A batch runs in one transaction (``BEGIN IMMEDIATE``, so a batch that writes never fails
half-way for want of the write lock): a failing statement rolls the whole batch back, as
D1's does. The file is in WAL mode with ``synchronous = FULL``, so a batch answered is a
batch on disk. A connection belongs to the thread that opened it; ``ocd.d1`` gives each
database one thread. Another process (``ocd d1 execute`` next to a running ocd) waits for
SQLite's lock up to ``BUSY_TIMEOUT_MS``.

Driver errors leave as :class:`ocd.errors.D1Error` with D1's text: SQLite's message, then
its result code's name ("no such table: x: SQLITE_ERROR").
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ocd.errors import D1Error
from ocd.files import new_file

BUSY_TIMEOUT_MS = 30_000
Value = int | float | str | bytes | None


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    params: tuple[Value, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """One statement's result and D1's meta for it."""

    columns: tuple[str, ...]
    rows: list[tuple[Value, ...]]
    changes: int
    last_row_id: int
    duration_ms: float
    rows_read: int
    rows_written: int
    size_after: int = 0


def _error(e: sqlite3.Error) -> D1Error:
    name = getattr(e, "sqlite_errorname", None)
    if name is None:  # raised by the driver itself (two statements in one, a bad parameter)
        name = "SQLITE_ERROR"
    # D1 names the primary code: SQLITE_CONSTRAINT, not SQLITE_CONSTRAINT_PRIMARYKEY
    primary = "_".join(name.split("_")[:2])
    return D1Error(f"{e}: {primary}")


def split(script: str) -> list[str]:
    """``script``'s statements, each whole (a trigger's body keeps its semicolons);
    comments and blank statements left out."""
    out: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                out.append(pending.strip())
            pending = ""
    if _has_code(pending[:-1]):
        out.append(pending[:-1].strip())
    return out


def _has_code(sql: str) -> bool:
    lines = (line.split("--", 1)[0] for line in sql.splitlines())
    return any(line.strip(" \t;") for line in lines)


class D1File:
    def __init__(self, path: Path) -> None:
        try:
            new_file(path)  # owner-only from the start; WAL and shm files copy its mode
        except FileExistsError:
            pass
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.execute("PRAGMA foreign_keys = ON")  # as D1
        except sqlite3.Error as e:
            raise _error(e) from None

    def close(self) -> None:
        self.db.close()

    def batch(self, statements: list[Statement]) -> list[Outcome]:
        """All of ``statements`` in one transaction, or none of them."""
        statements = [s for s in statements if _has_code(s.sql)]
        if not statements:
            raise D1Error("No SQL statements detected.")
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise _error(e) from None
        try:
            out = [self._one(s) for s in statements]
            self.db.execute("COMMIT")
        except sqlite3.Error as e:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise _error(e) from None
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        size = self._size()
        return [_sized(o, size) for o in out]

    def _one(self, s: Statement) -> Outcome:
        before = self.db.total_changes
        started = time.perf_counter()
        cursor = self.db.execute(s.sql, s.params)
        rows = cursor.fetchall()
        duration_ms = (time.perf_counter() - started) * 1000
        columns = tuple(d[0] for d in cursor.description or ())
        written = self.db.total_changes - before  # triggers' rows too, as D1 counts them
        last, own = self.db.execute("SELECT last_insert_rowid(), changes()").fetchone()
        # changes() is the last write's, stale after a statement that wrote nothing
        changes = own if written else 0
        # SQLite does not count the rows a statement visits for Python; the rows it
        # returned is the nearest measure D1's rows_read can carry.
        return Outcome(columns, rows, changes, last, duration_ms, len(rows), written)

    def _size(self) -> int:
        (pages,) = self.db.execute("PRAGMA page_count").fetchone()
        (page,) = self.db.execute("PRAGMA page_size").fetchone()
        return int(pages) * int(page)


def _sized(o: Outcome, size: int) -> Outcome:
    return Outcome(
        o.columns,
        o.rows,
        o.changes,
        o.last_row_id,
        o.duration_ms,
        o.rows_read,
        o.rows_written,
        size,
    )
