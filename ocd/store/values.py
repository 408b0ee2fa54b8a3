"""The store's value types and constants: what its methods take and return. The rules
they follow are the contract's, in ``ocd.store.base``."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from ocd import limits

CATALOGUE_FRESH_S = 1.0  # another node's queue change is seen within this long
FIFO_SUFFIX = ".fifo"
DEDUP_WINDOW_MS = 300_000  # a FIFO deduplication id is remembered this long after its send
MOVE_TASK_KEPT_MS = 14 * 86_400_000  # finished move tasks are listed this long (as SQS does)


class LeaseKind(IntEnum):
    PUSH = 1  # held by a dispatcher of one node; returned when that node stops or goes silent
    PULL = 2  # held by an HTTP/SQS client; survives every node until it lapses


@dataclass(frozen=True, slots=True)
class QueueSettings:
    delivery_delay_s: int = 0
    message_retention_period_s: int = limits.RETENTION_DEFAULT_S
    delivery_paused: bool = False
    # FIFO queues only (a name ending in ".fifo"): a send without a deduplication id is
    # deduplicated by the SHA-256 of its body; and whether ids are unique per queue or per group
    content_based_deduplication: bool = False
    deduplication_scope: str = "queue"  # or "message_group"


@dataclass(frozen=True, slots=True)
class QueueRecord:
    key: int  # the backend's internal id; stable for the life of the queue
    account: str
    name: str
    queue_id: str  # 32 lowercase hex, stable across restarts
    created_ms: int
    modified_ms: int
    settings: QueueSettings
    purged_ms: int | None = None  # when the last purge ran (it completes at once)

    @property
    def fifo(self) -> bool:
        """A FIFO queue: its name ends in ``.fifo`` (SQS's rule, the same on every surface)."""
        return self.name.endswith(FIFO_SUFFIX)


@dataclass(frozen=True, slots=True)
class PullConsumer:
    """An HTTP pull consumer; worker (push) consumers come from the config file."""

    queue_key: int
    consumer_id: str  # 32 lowercase hex
    created_ms: int
    dead_letter_queue: str | None = None
    batch_size: int = 10
    max_retries: int = 3
    visibility_timeout_ms: int = 30_000
    retry_delay_s: int = 0


@dataclass(frozen=True, slots=True)
class QueueExtras:
    """What the SQS endpoint keeps for a queue beyond ocd's own settings: its tags, and
    the SQS attributes that map onto none of them (``Policy``, ``RedriveAllowPolicy``,
    ``ReceiveMessageWaitTimeSeconds``, ``MaximumMessageSize``, ...). Opaque to the store."""

    sqs_attrs: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


# The value types made once per message are NamedTuples, not frozen dataclasses: as
# immutable, and built in a third of the time, which each message of a batch pays.


class NewMessage(NamedTuple):
    id: str
    content_type: str
    body: bytes
    sent_ms: int
    visible_ms: int
    group: str | None = None  # FIFO: the message group (required there, absent elsewhere)
    dedup: str | None = None  # FIFO: the deduplication id (explicit or the body's SHA-256)
    # Opaque to the store (the SQS endpoint's message and system attributes, as JSON): kept
    # with the message through claims, dead-letter moves, redrives and ``migrate-store``.
    attrs: bytes | None = None


class Delivery(NamedTuple):
    """One claimed message: ``attempts`` already counts this delivery."""

    seq: int
    id: str
    content_type: str
    body: bytes
    sent_ms: int
    attempts: int
    lease: int
    group: str | None = None  # FIFO queues: message group, sequence number, deduplication id
    sequence: int | None = None
    dedup: str | None = None
    attrs: bytes | None = None  # as sent (``NewMessage.attrs``)
    # When a claim first leased the message (epoch ms; see "First receive"); None in a peek
    first_received_ms: int | None = None


class FifoSent(NamedTuple):
    """One message of a FIFO send: the id and sequence number it is stored under (for a
    duplicate, those of the message it duplicates) and whether it was a duplicate."""

    id: str
    sequence: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class Backlog:
    """Unacknowledged messages of a queue: ready, delayed and in flight alike."""

    count: int
    bytes: int
    oldest_ms: int  # send time of the oldest; 0 when the queue is empty


@dataclass(frozen=True, slots=True)
class Ready:
    """What a dispatcher needs to decide whether a batch should go out now."""

    count: int  # ready messages, capped at the limit asked for
    first_ready_ms: int | None  # when the longest-waiting ready message became ready
    next_visible_ms: int | None  # earliest time a not-yet-ready message becomes ready


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Where exhausted messages go: another queue, or nowhere (deleted)."""

    queue: QueueRecord | None


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim asks for: up to ``limit`` ready messages at ``now_ms``, leased until
    ``lease_until_ms`` under a lease of ``kind``; a message whose attempts were already
    ``max_attempts`` goes to ``dead_letter`` instead; with ``max_batches``, nothing while
    that many PUSH leases of the queue are in flight across every node."""

    limit: int
    now_ms: int
    lease_until_ms: int
    max_attempts: int
    dead_letter: DeadLetter
    kind: LeaseKind = LeaseKind.PUSH
    max_batches: int | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    deliveries: list[Delivery]
    # Messages found with their attempts already spent (a crash or a lapsed lease used the
    # last one): moved to the dead-letter queue or deleted instead of delivered.
    exhausted: list[str] = field(default_factory=list)


class Retry(NamedTuple):
    """A delivered message to be made ready again at ``visible_ms`` (its attempt stays spent)."""

    seq: int
    visible_ms: int


class NotReady(NamedTuple):
    """Messages of a queue that are not ready now, and of those the ones under a lease."""

    not_ready: int
    leased: int


class Expired(NamedTuple):
    """Messages of one queue deleted for being older than its retention period."""

    account: str
    queue: str
    messages: int


@dataclass(frozen=True, slots=True)
class Settled:
    acked: int
    retried: int
    dead_lettered: int
    deleted: int


# ---------------------------------------------------------------- browsing (the dashboard)

BROWSE_STATES = ("any", "ready", "delayed", "inflight")


class Browsed(NamedTuple):
    """One message as a browser sees it, untouched: nothing is leased, acked or counted."""

    seq: int
    id: str
    content_type: str
    body: bytes  # the first ``body_bytes`` bytes only
    size: int  # the whole body's size
    sent_ms: int
    visible_ms: int
    attempts: int
    leased: bool  # under a lease that has not lapsed
    group: str | None = None  # FIFO queues: the message group and sequence number
    sequence: int | None = None


class BrowseCursor(NamedTuple):
    """Where a page of :meth:`Store.browse` ended: the last row's send time and seq."""

    sent_ms: int
    seq: int


@dataclass(frozen=True, slots=True)
class BrowseQuery:
    """A page of a queue's messages in send order, by keyset cursor (never an offset)."""

    limit: int = 25
    newest_first: bool = False
    after: BrowseCursor | None = None  # the cursor of the previous page's last row
    state: str = "any"  # one of BROWSE_STATES
    min_attempts: int = 0
    sent_from_ms: int | None = None  # inclusive
    sent_to_ms: int | None = None  # inclusive
    body_bytes: int = 200


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a search looks for: messages whose body holds ``needle`` (bytes,
    case-sensitive) and, if given, whose id is ``message_id``, among the newest
    ``scan_limit``; at most ``limit``, bodies cut at ``body_bytes``."""

    needle: bytes | None
    message_id: str | None
    scan_limit: int
    limit: int
    body_bytes: int


class Searched(NamedTuple):
    """Matches of a bounded search, newest first, and how many messages it looked at."""

    rows: list[Browsed]
    scanned: int


# ---------------------------------------------------------------- bulk move tasks

MOVE_ACTIVE = ("running", "cancelling")
MOVE_FINISHED = ("completed", "cancelled", "failed")


@dataclass(frozen=True, slots=True)
class MoveTaskRow:
    """A bulk redrive or delete as the store keeps it, so that it survives a restart.

    ``source`` is the queue messages are taken from (a redrive's dead-letter queue);
    ``destination`` None is a delete. ``bound`` is the last (send time, seq) the task may
    take, fixed at its start; ``cursor`` the last (send time, seq) it has looked at, so a
    resumed task goes on after it. ``spec`` is the caller's own description of what to
    take (filters, named seqs), kept as text. At most one redrive per source is active
    (``MOVE_ACTIVE``) at a time: a second is ``StoreConflict``."""

    task_id: str
    account: str
    source_id: str  # queue ids: a task follows its queues through renames
    source: str
    destination_id: str | None
    destination: str | None
    total: int
    started_ms: int
    done: int = 0
    state: str = "running"  # running|cancelling -> completed|cancelled|failed
    error: str | None = None
    finished_ms: int | None = None
    rate: int | None = None  # messages per second at most
    bound: BrowseCursor | None = None
    cursor: BrowseCursor | None = None
    spec: str = "{}"
    node: str = ""


# ---------------------------------------------------------------- KV namespaces


class KvNamespace(NamedTuple):
    """One KV namespace: its id (the ``id`` of a ``kv_namespaces`` binding) in an account."""

    account: str
    namespace_id: str


class KvEntry(NamedTuple):
    """A key's value as stored: its bytes, when it expires (epoch ms; None: never) and its
    metadata (JSON text, kept as given; None: none)."""

    value: bytes
    expires_ms: int | None = None
    metadata: str | None = None


class KvKey(NamedTuple):
    """A key as a listing shows it."""

    name: str
    expires_ms: int | None
    metadata: str | None


class KvPage(NamedTuple):
    """A page of a listing; ``complete`` when no key after its last one matches."""

    keys: list[KvKey]
    complete: bool


def prefix_end(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: there is
    none), so a prefix listing is a range scan. Code point order is UTF-8 byte order, the
    order keys are kept in."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop()) + 1
        if last == 0xD800:  # surrogates are never in a key
            last = 0xE000
        if last <= 0x10FFFF:
            return "".join(chars) + chr(last)
    return None
