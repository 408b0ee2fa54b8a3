"""What only the SQLite backend does: one process owns the data directory, and the file's
own checks (schema version, foreign files)."""

from __future__ import annotations

import sqlite3

import pytest

from ocd.errors import SchemaError, StoreLockedError
from ocd.store import SqliteStore
from ocd.store.sqlite import sql as sqlite_sql
from tests.store.conftest import T0


async def test_second_open_of_same_data_dir_is_refused(tmp_path):
    s = SqliteStore(tmp_path)
    await s.open(T0)
    try:
        with pytest.raises(StoreLockedError, match="in use by another ocd"):
            await SqliteStore(tmp_path).open(T0)
    finally:
        await s.close()


async def test_newer_schema_is_refused(tmp_path):
    s = SqliteStore(tmp_path)
    await s.open(T0)
    await s.close()
    con = sqlite3.connect(tmp_path / "scheduler.sqlite")
    con.execute(f"PRAGMA user_version={len(sqlite_sql.MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(SchemaError, match="newer than this ocd"):
        await SqliteStore(tmp_path).open(T0)


async def test_foreign_sqlite_file_is_refused(tmp_path):
    con = sqlite3.connect(tmp_path / "scheduler.sqlite")
    con.execute("CREATE TABLE other (x)")
    con.close()
    with pytest.raises(SchemaError, match="not an ocd database"):
        await SqliteStore(tmp_path).open(T0)
