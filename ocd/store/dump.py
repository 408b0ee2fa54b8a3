"""A backend-neutral picture of a whole store, for moving one backend's data to another
(``ocd migrate-store``): one backend's exporter makes a ``Dump``, another's loader takes it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ocd.store.values import PullConsumer, QueueExtras, QueueRecord


class StoredMessage(NamedTuple):
    """One message as stored, with its queue named by ``queue_id`` (keys differ by backend).
    A lease is not carried over: a message leased when the data was exported keeps its
    ``visible_ms`` (the lease deadline) and so comes back when that lease would have lapsed."""

    seq: int  # kept where it names a waiting or leased message: pull lease ids stay valid
    queue_id: str
    id: str
    content_type: str
    body: bytes
    sent_ms: int
    visible_ms: int
    attempts: int
    group: str | None = None  # FIFO queues: group, deduplication id, sequence number
    dedup: str | None = None
    sequence: int | None = None
    attrs: bytes | None = None  # the SQS endpoint's message attributes, as stored
    first_received_ms: int | None = None  # when a claim first leased it


class StoredDedup(NamedTuple):
    """A FIFO deduplication id still inside its window."""

    queue_id: str
    scope: str
    dedup: str
    expires_ms: int
    message_id: str
    sequence: int


@dataclass
class Dump:
    queues: list[QueueRecord]
    consumers: list[tuple[str, PullConsumer]]  # (queue_id, consumer)
    secrets: dict[str, bytes]
    message_count: int
    messages: Iterator[list[StoredMessage]] = field(default_factory=lambda: iter(()))
    fifo_sequences: dict[str, int] = field(default_factory=dict)  # queue_id -> last given
    dedup: list[StoredDedup] = field(default_factory=list)
    extras: dict[str, QueueExtras] = field(default_factory=dict)  # queue_id -> SQS extras


@dataclass(frozen=True, slots=True)
class Copied:
    queues: int
    consumers: int
    messages: int
