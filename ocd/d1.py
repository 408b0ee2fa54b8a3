"""D1 databases: each a SQLite file ``<data_dir>/d1/<database_id>.sqlite``, a node's own.

:class:`D1Service` runs batches for the bindings (workerd's D1 protocol in ``ocd.js.d1``,
Python workers through :class:`D1Binding`): each database has one thread of its own, so a
long query never holds the event loop and the database's writes are one at a time.
Results travel in D1's wire shape (:func:`result_json`), the one workerd's binding reads.
``ocd d1`` (migrations, execute) opens the same files from its own process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import runtime
from ocd.errors import D1Error
from ocd.files import private_dir
from ocd.store.sqlite.d1 import D1File, Outcome, Statement, Value, split

log = logging.getLogger(__name__)

SERVED_BY = "ocd"
FORMATS = ("ARRAY_OF_OBJECTS", "ROWS_AND_COLUMNS", "NONE")


def database_path(data_dir: Path, database_id: str) -> Path:
    return data_dir / "d1" / f"{database_id}.sqlite"


def open_database(data_dir: Path, database_id: str) -> D1File:
    private_dir(data_dir / "d1")
    return D1File(database_path(data_dir, database_id))


@dataclass
class _Open:
    file: D1File
    thread: ThreadPoolExecutor


class D1Service:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._open: dict[str, _Open] = {}
        self._opening = asyncio.Lock()

    async def _database(self, database_id: str) -> _Open:
        async with self._opening:
            db = self._open.get(database_id)
            if db is None:
                thread = ThreadPoolExecutor(1, thread_name_prefix=f"d1-{database_id}")
                loop = asyncio.get_running_loop()
                try:
                    file = await loop.run_in_executor(
                        thread, open_database, self.data_dir, database_id
                    )
                except BaseException:
                    thread.shutdown(wait=False)
                    raise
                db = self._open[database_id] = _Open(file, thread)
            return db

    async def batch(self, database_id: str, statements: list[Statement]) -> list[Outcome]:
        """``statements`` in one transaction; :class:`D1Error` (nothing changed) if any
        fails. Answered once committed to disk."""
        db = await self._database(database_id)
        loop = asyncio.get_running_loop()
        # shielded: once handed to the thread, the batch runs to its commit or rollback
        return await asyncio.shield(loop.run_in_executor(db.thread, db.file.batch, statements))

    async def close(self) -> None:
        for db in self._open.values():
            await asyncio.get_running_loop().run_in_executor(db.thread, db.file.close)
            db.thread.shutdown(wait=True)
        self._open.clear()


def statement(sql: object, params: object) -> Statement:
    """A statement as the wire carries it: byte arrays are lists of numbers."""
    if not isinstance(sql, str):
        raise D1Error("Invalid request: sql must be a string")
    values: list[Value] = []
    for p in params or []:  # type: ignore[attr-defined]
        if isinstance(p, bytes | bytearray | memoryview):
            values.append(bytes(p))
        elif isinstance(p, list):
            try:
                values.append(bytes(p))
            except (TypeError, ValueError):
                raise D1Error("Invalid request: a byte array holds bytes") from None
        elif p is None or (isinstance(p, int | float | str) and not isinstance(p, bool)):
            values.append(p)
        elif isinstance(p, bool):
            values.append(int(p))
        else:
            raise D1Error(f"Type '{type(p).__name__}' not supported for value '{p}'")
    return Statement(sql, tuple(values))


def _cell(value: Value) -> Any:
    return list(value) if isinstance(value, bytes) else value


def meta_json(o: Outcome) -> dict[str, Any]:
    return {
        "served_by": SERVED_BY,
        "served_by_primary": True,
        "timings": {"sql_duration_ms": o.duration_ms},
        "duration": o.duration_ms,
        "changes": o.changes,
        "last_row_id": o.last_row_id,
        "changed_db": o.changes > 0,
        "size_after": o.size_after,
        "rows_read": o.rows_read,
        "rows_written": o.rows_written,
    }


def result_json(o: Outcome, results_format: str) -> dict[str, Any]:
    """One statement's answer as D1 sends it: rows as columns and arrays, or as objects."""
    rows = [[_cell(v) for v in row] for row in o.rows]
    results: Any
    if results_format == "ROWS_AND_COLUMNS":
        results = {"columns": list(o.columns), "rows": rows}
    else:
        results = [dict(zip(o.columns, row, strict=True)) for row in rows]
    return {"success": True, "results": results, "meta": meta_json(o)}


class D1Binding:
    """A Python worker's ``env.<binding>`` backend (``runtime.D1Backend``): one database of
    ``service``; a failure is ``runtime.D1Error`` with the text a JS Worker's error has."""

    def __init__(self, service: D1Service, database_id: str) -> None:
        self.service = service
        self.database_id = database_id

    async def query(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
        try:
            batch = [statement(sql, list(params)) for sql, params in statements]
            outcomes = await self.service.batch(self.database_id, batch)
        except D1Error as e:
            raise runtime.D1Error(f"D1_ERROR: {e}") from None
        return [result_json(o, "ROWS_AND_COLUMNS") for o in outcomes]


# ---------------------------------------------------------------- ocd d1 (its own process)


def execute(file: D1File, script: str) -> list[Outcome]:
    """``ocd d1 execute``: every statement of ``script`` in one transaction."""
    return file.batch([Statement(sql) for sql in split(script)])


def pending_migrations(file: D1File, migrations_dir: Path, table: str) -> list[Path]:
    """The ``*.sql`` files of ``migrations_dir`` not yet in ``table`` (wrangler's
    ``d1_migrations``: id, name, applied_at), in name order."""
    quoted = '"' + table.replace('"', '""') + '"'
    file.batch(
        [
            Statement(
                f"CREATE TABLE IF NOT EXISTS {quoted}("
                "id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, "
                "applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)"
            )
        ]
    )
    (done,) = file.batch([Statement(f"SELECT name FROM {quoted} ORDER BY id")])
    applied = {row[0] for row in done.rows}
    files = sorted(migrations_dir.glob("*.sql")) if migrations_dir.is_dir() else []
    return [f for f in files if f.name not in applied]


def apply_migration(file: D1File, migration: Path, table: str) -> None:
    """One migration and its row in ``table``, in one transaction: all or nothing."""
    quoted = '"' + table.replace('"', '""') + '"'
    statements = [Statement(sql) for sql in split(migration.read_text())]
    statements.append(Statement(f"INSERT INTO {quoted} (name) VALUES (?)", (migration.name,)))
    file.batch(statements)
