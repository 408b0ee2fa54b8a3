"""The PostgreSQL backend: one database shared by any number of ocd nodes (asyncpg)."""

from ocd.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
