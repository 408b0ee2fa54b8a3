"""The queue authority. Only this package touches a database driver.

``make_store`` picks a backend by name and imports it only then, so a node on SQLite never
loads asyncpg and one on PostgreSQL never opens a SQLite file.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocd.clock import Clock, wall_ms
from ocd.store.base import (
    Browsing,
    CatalogueReads,
    Coordination,
    Kv,
    Lifecycle,
    Messages,
    MoveTasks,
    QueueAdmin,
    Store,
)
from ocd.store.values import (
    BROWSE_STATES,
    CATALOGUE_FRESH_S,
    DEDUP_WINDOW_MS,
    FIFO_SUFFIX,
    MOVE_ACTIVE,
    MOVE_FINISHED,
    MOVE_TASK_KEPT_MS,
    Backlog,
    BrowseCursor,
    Browsed,
    BrowseQuery,
    Claim,
    Claimed,
    DeadLetter,
    Delivery,
    Expired,
    FifoSent,
    KvEntry,
    KvKey,
    KvNamespace,
    KvPage,
    LeaseKind,
    MoveTaskRow,
    NewMessage,
    NotReady,
    PullConsumer,
    QueueExtras,
    QueueRecord,
    QueueSettings,
    Ready,
    Retry,
    Searched,
    SearchQuery,
    Settled,
)

if TYPE_CHECKING:
    from ocd.store.sqlite import SqliteStore

# backend name -> "module:class"; each class takes the keyword options of make_store it uses
BACKENDS = {
    "sqlite": "ocd.store.sqlite:SqliteStore",
    "postgres": "ocd.store.postgres:PostgresStore",
}


def make_store(
    backend: str,
    *,
    data_dir: Path | None = None,
    durability: str = "full",
    dsn: str | None = None,
    pool_size: int = 10,
    node_heartbeat_s: float = 15.0,
    clock: Clock = wall_ms,
    disk_reserve_bytes: int | None = None,
    accept_data_loss: bool = False,
) -> Store:
    """A closed store of the named backend; ``open()`` it to use it. ``accept_data_loss``:
    start on a SQLite database older than its high-water mark, or on a PostgreSQL database
    other or older than the one this node (its ``data_dir``) recorded, saying so."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown store backend {backend!r}; known: {', '.join(BACKENDS)}")
    module, name = BACKENDS[backend].split(":")
    cls: Any = getattr(importlib.import_module(module), name)
    if backend == "sqlite":
        assert data_dir is not None
        reserve = {} if disk_reserve_bytes is None else {"disk_reserve_bytes": disk_reserve_bytes}
        store: Store = cls(data_dir, durability, accept_data_loss=accept_data_loss, **reserve)
    else:
        assert dsn is not None
        store = cls(
            dsn,
            durability,
            pool_size=pool_size,
            node_heartbeat_s=node_heartbeat_s,
            clock=clock,
            data_dir=data_dir,
            accept_data_loss=accept_data_loss,
        )
    return store


def __getattr__(name: str) -> Any:
    if name == "SqliteStore":  # for tests and tools that want the SQLite backend by name
        return importlib.import_module("ocd.store.sqlite").SqliteStore
    raise AttributeError(name)


__all__ = [
    "BACKENDS",
    "BROWSE_STATES",
    "CATALOGUE_FRESH_S",
    "DEDUP_WINDOW_MS",
    "FIFO_SUFFIX",
    "MOVE_ACTIVE",
    "MOVE_FINISHED",
    "MOVE_TASK_KEPT_MS",
    "Backlog",
    "BrowseCursor",
    "BrowseQuery",
    "Browsed",
    "Browsing",
    "CatalogueReads",
    "Claim",
    "Claimed",
    "Coordination",
    "DeadLetter",
    "Delivery",
    "Expired",
    "FifoSent",
    "Kv",
    "KvEntry",
    "KvKey",
    "KvNamespace",
    "KvPage",
    "LeaseKind",
    "Lifecycle",
    "Messages",
    "MoveTaskRow",
    "MoveTasks",
    "NewMessage",
    "NotReady",
    "PullConsumer",
    "QueueAdmin",
    "QueueExtras",
    "QueueRecord",
    "QueueSettings",
    "Ready",
    "Retry",
    "SearchQuery",
    "Searched",
    "Settled",
    "SqliteStore",
    "Store",
    "make_store",
]
