"""The PostgreSQL backend: one database shared by any number of ocd nodes.

``PostgresStore`` is the Store protocol's facets over one shared core (``core.py``: state,
connections, lifecycle, nodes and the change feed), one module each: ``queues.py``
(CatalogueReads and QueueAdmin), ``messages.py``, ``browse.py``, ``moves.py``,
``coordination.py`` and ``kv.py``.
"""

from __future__ import annotations

from ocd.store.postgres.browse import PostgresBrowsing
from ocd.store.postgres.coordination import PostgresCoordination
from ocd.store.postgres.kv import PostgresKv
from ocd.store.postgres.messages import PostgresMessages
from ocd.store.postgres.moves import PostgresMoves
from ocd.store.postgres.queues import PostgresQueues


class PostgresStore(
    PostgresQueues,
    PostgresMessages,
    PostgresBrowsing,
    PostgresMoves,
    PostgresCoordination,
    PostgresKv,
):
    """The Store on PostgreSQL: every facet of ``ocd.store.base.Store``, each from its own
    module, all sharing one ``PostgresCore`` (one pool, one writer, one catalogue)."""
