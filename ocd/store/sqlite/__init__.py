"""The SQLite backend: ``scheduler.sqlite`` in the data directory, owned by one process."""

from ocd.store.sqlite.store import DB_NAME, SqliteStore

__all__ = ["DB_NAME", "SqliteStore"]
