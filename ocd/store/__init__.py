"""The queue authority. Only this package touches the database driver."""

from ocd.store.base import (
    Backlog,
    Claimed,
    DeadLetter,
    Delivery,
    LeaseKind,
    NewMessage,
    PullConsumer,
    QueueRecord,
    QueueSettings,
    Ready,
    Settled,
    Store,
)
from ocd.store.sqlite import SqliteStore

__all__ = [
    "Backlog",
    "Claimed",
    "DeadLetter",
    "Delivery",
    "LeaseKind",
    "NewMessage",
    "PullConsumer",
    "QueueRecord",
    "QueueSettings",
    "Ready",
    "Settled",
    "SqliteStore",
    "Store",
]
