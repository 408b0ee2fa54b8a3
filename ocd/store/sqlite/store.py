"""The SQLite backend: ``scheduler.sqlite`` in the data directory.

The group-committing writer lives in ``writer.py``. Callers queue operations and await a future;
the writer runs everything pending in one transaction (group commit), commits, then
resolves each caller. Reads that only inform scheduling (``ready``, oldest timestamp) use a
second connection, which WAL lets run beside the writer.

The process owns the database file (an exclusive ``flock`` on ``scheduler.sqlite`` itself), so
at open every push lease left by a crash is returned at once instead of waiting it out.
Before anything is written, ``guard`` checks read-only that the file is ocd's and holds at
least what the high-water mark (``mark``) says was committed.

The backend is one class, ``SqliteStore``, composed of a facet per module: ``core``
(Lifecycle), ``queues`` (CatalogueReads, QueueAdmin), ``messages``, ``browse``, ``moves``
``coordination`` and ``kv``, each a subclass of ``SqliteCore`` that holds the shared state.
"""

from __future__ import annotations

from ocd.store.sqlite.browse import SqliteBrowsing
from ocd.store.sqlite.coordination import SqliteCoordination
from ocd.store.sqlite.core import CHECKPOINT_EVERY_S, DB_NAME, WAL_LIMIT_BYTES, SqliteCore
from ocd.store.sqlite.kv import SqliteKv
from ocd.store.sqlite.messages import SqliteMessages
from ocd.store.sqlite.moves import SqliteMoves
from ocd.store.sqlite.queues import SqliteQueues

__all__ = ["CHECKPOINT_EVERY_S", "DB_NAME", "WAL_LIMIT_BYTES", "SqliteCore", "SqliteStore"]


class SqliteStore(
    SqliteQueues, SqliteMessages, SqliteBrowsing, SqliteMoves, SqliteCoordination, SqliteKv
):
    """The SQLite backend of :class:`ocd.store.Store`: every facet over one core."""
