"""The queue authority's contract: domain operations and value types, no SQL.

Everything above ``ocd.store`` talks to a :class:`Store`. A backend (``ocd.store.sqlite``,
``ocd.store.postgres``) implements it and passes the one conformance suite in
``tests/store/``; ``ocd.store.open_store`` picks one by config.

The rules every backend keeps:

- **Time** is passed in by the caller as epoch milliseconds, so tests control the clock.
- **Ready**: a message is ready when ``visible_ms <= now``. A claim hides it until its lease
  deadline by moving ``visible_ms`` forward, so "in flight", "delayed" and "retrying later"
  are all the same thing to the store: not visible yet.
- **Attempts** are counted at claim, not at settle: a delivery's ``attempts`` includes itself,
  so a message that crashes its consumer cannot loop for ever.
- **First receive**: the first claim of a message (any lease kind: an SQS receive, a REST
  pull, a push batch) records its ``now_ms`` (``Delivery.first_received_ms``, SQS's
  ``ApproximateFirstReceiveTimestamp``), in the claim's own statement; retries, releases,
  visibility changes and later claims keep it. A move to another queue (dead-letter move or
  redrive) clears it with the attempts: it is the first receive *from that queue*.
- **Leases**: a claim puts its messages under one lease (a random 62-bit number) of a kind.
  A PUSH lease is held by a dispatcher of one *node* (one ocd process start: ``node_id``,
  random, recorded in the database with a heartbeat); a PULL lease is held by an HTTP or SQS
  client and outlives any node until it lapses. A lease lapses at its deadline: the messages
  become ready again with their attempt spent. PUSH leases come back sooner: a node returns
  its own at a clean start and shutdown, and any live node returns those of a node whose
  heartbeat has lapsed (``node_heartbeat_s``). On SQLite one node owns the file (a lock).
- **Release** hands leased messages back as ready now and gives back the attempt their claim
  spent; only messages under a lease of the given kind are touched.
- **Dead-letter moves** keep a message's id, body and send timestamp, put it in the
  dead-letter queue ready now, and reset its attempts to 0 (and its first receive). Without
  a dead-letter queue (or when it no longer exists) the message is deleted.
- **Attributes** (``NewMessage.attrs``) are an opaque blob the store keeps with its
  message wherever it goes (claims, peeks, dead-letter moves, redrives, ``migrate-store``)
  and never reads; they do not count in a backlog's bytes.
- **Acks** delete. A seq named with the wrong queue (it moved to a dead-letter queue since)
  touches nothing: every statement by seq also names the queue.
- **Catalogue**: ``queues``, ``queue``, ``queue_by_id`` and ``pull_consumer`` are answered
  from memory, kept fresh by the backend's change feed: at once for this node's own changes,
  on its notification for another node's (within ``CATALOGUE_FRESH_S`` of a lost feed
  connection coming back, and read again at least every ``CATALOGUE_POLL_S`` of the
  backend's). Every write that names a queue checks it
  still exists, and a write to a queue deleted meanwhile raises ``QueueNotFound``.
- **Wake-ups**: ``watch(queue)`` returns an event set by the next commit, on any node, that
  may have made messages of that queue ready (sends, retries, releases, dead-letter moves,
  settings changes); a backend that can miss notifications (while its change feed's
  connection is down) sets every event when it is made again, and until then at least
  every ``CATALOGUE_FRESH_S``; a channel listened to anew sets its event once it is live.
- **Errors**: driver errors become ``ocd.errors`` store errors at one boundary per backend:
  ``StoreUnavailable`` (retryable), ``StoreFull``, ``StoreConflict``, ``StoreCorrupt``.
- **FIFO queues** (``QueueRecord.fifo``): every message has a group and a sequence number,
  strictly increasing per queue in commit order and never reused (a dead-letter move gives
  a new one in the dead-letter queue). A group's *head* is its message of lowest sequence
  number; a claim takes only heads that are ready, then the consecutive ready messages
  after them, so no message of a group is leased while an earlier one is leased, waiting
  out a retry delay or otherwise not ready (groups are kept in their own indexed table,
  so that a deep group never slows the claims of others). A settle that retries or
  dead-letters a message also releases, attempt given back, every later message of its
  group held under the same lease and not acked in that settle. A send whose deduplication
  id was sent to the queue (or its group, with ``deduplication_scope = "message_group"``)
  within ``DEDUP_WINDOW_MS`` of its ``sent_ms`` stores nothing and answers with the
  earlier message's id and sequence number; acks do not end the window, a purge does.
- **Durability**: ``enqueue`` and queue administration return once committed durably (fsync
  or synchronous commit); claims, settles and releases may be committed without waiting for
  the disk, since losing one to a power cut only means a redelivery.
- **Cron ticks**: a schedule's run due at a minute is claimed once across every node
  (``claim_cron_tick``), before it runs; the store keeps each schedule's last claimed tick so
  that a node starting after an outage runs a missed schedule once, not once per tick.
- **Clock mark**: the highest time (``save_clock_mark``) any node of the deployment said it
  used, kept so that a daemon's clock never starts earlier than a time already used
  (``ocd.clock``); saving a lower time than the mark keeps the mark.
- **Move tasks** (bulk redrives and deletes) are rows of their own (``MoveTaskRow``): a
  chunk's messages and the task's progress commit together (``move_task_chunk``), so a task
  resumed after a crash goes on from its cursor and never takes a message twice; one
  active redrive per source queue; an active task of a node that is gone is adopted by the
  next node that asks (``adopt_move_tasks``).
- **KV namespaces** (``Kv``) are keyed by (account, namespace id, key), beside the queues
  and unrelated to them; every node of a shared database reads the same namespace, and a
  read after a write, on any node, sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from ocd.store.values import (
    MOVE_ACTIVE,
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


class Lifecycle(Protocol):
    """Opening and closing the store, and its health."""

    node_id: str  # this process start's node; owns its PUSH leases
    where: str  # the database, for messages: a path, or a DSN without its password

    async def open(self, now_ms: int) -> None:
        """Connect, migrate (refusing a newer or foreign schema with ``StoreCorrupt``), load
        the catalogue, register this node, and return PUSH leases left by this data's
        previous owner (SQLite) or by nodes whose heartbeat lapsed (shared databases)."""

    async def close(self) -> None:
        """Commit what is pending, return this node's PUSH leases still held, and disconnect."""

    def available(self) -> bool:
        """Whether the database answered lately; false while it cannot be reached."""

    def background(self) -> list[asyncio.Task[Any]]:
        """The store's own loops (its writer, and checkpoints, heartbeat or change feed),
        started by ``open``: each runs until ``close``, so one that ends before is dead and
        the daemon stops rather than serve without it."""

    def full(self) -> str | None:
        """While the disk (or the database's quota) is full: why, naming where, in a
        sentence; else None. SQLite then refuses sends up front (``StoreFull``) while
        claims, acks and retries go on; PostgreSQL says so from its last failed write
        until a send succeeds again."""


class CatalogueReads(Protocol):
    """The queues and pull consumers this node knows, answered from memory, and the
    wake-ups of their commits."""

    def queues(self) -> list[QueueRecord]:
        """Every queue of every account, sorted by (account, name)."""

    def queue(self, name: str, account: str = "local") -> QueueRecord | None: ...

    def queue_by_id(self, queue_id: str) -> QueueRecord | None: ...

    def pull_consumer(self, queue: QueueRecord) -> PullConsumer | None: ...

    async def lookup(self, name: str, account: str = "local") -> QueueRecord | None:
        """``queue(name, account)``, asking the database when the catalogue does not know
        the name yet: a queue created on another node a moment ago is found at once."""

    async def lookup_by_id(self, queue_id: str) -> QueueRecord | None:
        """``queue_by_id``, asking the database on a miss, as ``lookup`` does."""

    def backlog_count(self, queue: QueueRecord) -> int:
        """The backlog's count as last known to this node, without a read (status lines)."""

    def known_empty(self, queue: QueueRecord) -> bool:
        """Whether this node knows, without a read, that ``queue`` holds no message at all
        (ready, delayed or in flight): its memory is exact where one node owns the database;
        a shared database's other nodes may have sent since, so there it never knows."""

    def watch(self, queue: QueueRecord) -> asyncio.Event:
        """An event set at the next commit, on any node, that may make messages of
        ``queue`` ready."""


class QueueAdmin(Protocol):
    """Creating, changing and deleting queues and their pull consumers."""

    async def create_queue(
        self, name: str, account: str, settings: QueueSettings, now_ms: int
    ) -> QueueRecord:
        """Create a queue with a new random ``queue_id``; ``StoreConflict`` if the account
        has one of that name (of two concurrent creates, on any nodes, one wins)."""

    async def ensure_queue(
        self, name: str, account: str, settings: QueueSettings | None, now_ms: int
    ) -> QueueRecord:
        """The queue of that name, created if missing; with ``settings``, also made to have
        them. Concurrent ensures of one name make one queue."""

    async def update_queue(
        self, queue: QueueRecord, settings: QueueSettings, now_ms: int, new_name: str | None = None
    ) -> QueueRecord:
        """Replace the settings (and the name); ``QueueNotFound`` if it was deleted,
        ``StoreConflict`` if the new name is taken. Messages, id and consumer stay."""

    async def delete_queue(self, queue: QueueRecord) -> None:
        """Delete the queue, its messages and its pull consumer."""

    async def put_pull_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        """Create the queue's pull consumer, or update its settings (id and creation stay)."""

    async def delete_pull_consumer(self, queue: QueueRecord) -> bool: ...

    async def queue_extras(self, queue: QueueRecord) -> QueueExtras:
        """The queue's tags and SQS attributes as last set (empty ones for a new queue);
        read from the database, so a change made on another node is seen at once. Not in
        the catalogue: only the SQS endpoint reads them. Deleting the queue deletes them."""

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        """Replace the queue's tags and SQS attributes, durably; ``QueueNotFound`` if the
        queue was deleted."""


class Messages(Protocol):
    """Sending, claiming, settling and expiring messages."""

    async def enqueue(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> Backlog:
        """Store every message or none, durably, and return the queue's backlog after them.
        Concurrent callers share a transaction (group commit). On a FIFO queue this is
        ``enqueue_fifo`` without its per-message answers."""

    async def enqueue_fifo(
        self, queue: QueueRecord, messages: Sequence[NewMessage]
    ) -> tuple[Backlog, list[FifoSent]]:
        """``enqueue`` for a FIFO queue (every message has a ``group``): applies
        deduplication, including between messages of this call, and gives sequence numbers
        in order. One ``FifoSent`` per message, in order."""

    async def ready(self, queue: QueueRecord, now_ms: int, limit: int) -> Ready:
        """What a dispatcher needs to decide whether a batch should go out now."""

    async def claim(self, queue: QueueRecord, ask: Claim) -> Claimed:
        """Lease up to ``ask.limit`` ready messages, oldest-visible first, until
        ``ask.lease_until_ms``, counting an attempt on each. Messages whose attempts were
        already ``ask.max_attempts`` are dead-lettered instead (``Claimed.exhausted``).
        Concurrent claims, on any nodes, never lease one message twice. With
        ``ask.max_batches``, claims nothing while that many PUSH leases of the queue are in
        flight across every node (a consumer's ``max_concurrency``)."""

    async def settle(
        self,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        """Delete ``acks``, make ``retries`` ready at their time, dead-letter ``dead``: one
        transaction."""

    async def release(
        self,
        queue: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
        kind: LeaseKind = LeaseKind.PUSH,
    ) -> int:
        """Hand leased messages back, ready now, giving back their attempt."""

    async def expire(self, now_ms: int) -> list[Expired]:
        """Delete messages past their queue's retention, in bounded chunks."""

    async def purge(self, queue: QueueRecord, now_ms: int) -> int:
        """Delete every message of the queue and record when (``purged_ms``)."""

    async def peek(self, queue: QueueRecord, now_ms: int, limit: int) -> list[Delivery]:
        """Ready messages, oldest first, without leasing them or counting an attempt."""

    async def delete_messages(self, queue: QueueRecord, seqs: Sequence[int]) -> int: ...

    async def backlog(self, queue: QueueRecord) -> Backlog:
        """Unacknowledged messages of the queue over the whole deployment."""

    async def queue_stats(self, now_ms: int) -> dict[int, NotReady]:
        """Queue key -> its messages not ready now, and of those the leased ones."""


class Browsing(Protocol):
    """Reading a queue's messages for people (the dashboard, ``ocd queues``), never
    leasing or reordering anything."""

    async def browse(self, queue: QueueRecord, now_ms: int, query: BrowseQuery) -> list[Browsed]:
        """A page of the queue's messages ordered by (send time, seq), oldest or newest
        first, strictly after ``query.after``; filtered by state at ``now_ms`` (ready:
        visible now; delayed: not visible and not leased; inflight: leased), attempts and a
        send-time range. Walks the (queue, send time) index from the cursor: a page costs
        its size, not the queue's. Never leases, acks or reorders anything."""

    async def message(self, queue: QueueRecord, seq: int, body_bytes: int) -> Browsed | None:
        """One message of the queue by seq (a browse row's), its body cut at ``body_bytes``;
        None if it is gone (or in another queue now)."""

    async def present(self, queue: QueueRecord, seqs: Sequence[int]) -> list[int]:
        """Those of ``seqs`` that are messages of the queue now (in any state), in no
        particular order; one query however many seqs (up to 10,000)."""

    async def search(self, queue: QueueRecord, now_ms: int, query: SearchQuery) -> Searched:
        """Messages among the newest ``query.scan_limit`` of the queue (and any sent in
        the same millisecond as the oldest of those) whose body contains ``query.needle``
        (bytes, case-sensitive) and, if given, whose id is ``query.message_id``; at most
        ``query.limit``, newest first. ``scanned`` is how many messages the search window
        held. Bounded by ``query.scan_limit`` whatever the queue's size; runs in the
        database (SQLite: on the read connection's thread), never on the event loop."""


class MoveTasks(Protocol):
    """Moving messages between queues: redrives, and bulk move tasks that survive a crash."""

    # Whether tasks no live node runs can appear while this node runs (a shared database:
    # another node dies), so that the daemon looks for them every few seconds. SQLite has
    # one owner, who adopts its predecessor's at start (``adopt_move_tasks``).
    orphans_appear: bool

    async def move_messages(
        self, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        """Move messages of ``source`` by seq to ``dest`` (a redrive): id, body and send
        time kept, attempts and first receive reset, ready now, any lease dropped; one
        transaction, with the backlog counts of both queues kept. Seqs no longer in
        ``source`` are skipped. Returns how many moved."""

    async def create_move_task(self, task: MoveTaskRow, now_ms: int) -> None:
        """Record a new task (its ``node`` this node's), durably. ``StoreConflict`` if it is
        a redrive and its source has an active redrive. Forgets tasks finished more than
        ``MOVE_TASK_KEPT_MS`` ago."""

    async def move_tasks(self) -> list[MoveTaskRow]:
        """Every task kept, of every account, newest first."""

    async def move_task_chunk(
        self,
        task_id: str,
        source: QueueRecord,
        dest: QueueRecord | None,
        seqs: Sequence[int],
        cursor: BrowseCursor | None,
        now_ms: int,
    ) -> MoveTaskRow | None:
        """One chunk of a task in one transaction: ``move_messages`` to ``dest`` (or
        ``delete_messages`` without one), the task's ``done`` raised by how many moved and
        its ``cursor`` set (when given). A crash leaves both or neither, so a resumed task
        never takes a message twice. Returns the task after it (its state may have become
        ``cancelling`` meanwhile, on any node); None if the task is not kept."""

    async def set_move_task_state(
        self,
        task_id: str,
        state: str,
        now_ms: int,
        error: str | None = None,
        expect: Sequence[str] = MOVE_ACTIVE,
    ) -> MoveTaskRow | None:
        """Change the task's state if it is one of ``expect`` (finishing it, with
        ``finished_ms``, if ``state`` is in ``MOVE_FINISHED``); None if it was not."""

    async def adopt_move_tasks(self) -> list[MoveTaskRow]:
        """Active tasks no live node runs (SQLite: left by this data's previous owner;
        shared databases: of nodes no longer registered), now this node's to resume."""


class Coordination(Protocol):
    """What the nodes of one deployment agree on: cron ticks, the clock's mark, secrets."""

    async def secret(self, name: str) -> bytes:
        """A random 32-byte key kept in the database, made on first use and the same for
        every node (e.g. the key that signs pull lease ids)."""

    async def claim_cron_tick(self, schedule: str, due_ms: int, node: str) -> bool:
        """Claim the run of ``schedule`` due at ``due_ms`` for ``node``: True if this call
        claimed it, False if that tick or a later one was claimed already, on any node. Of
        concurrent claims of one tick exactly one wins. Committed durably, so a claimed run
        is never claimed again after a crash (a run is at most once)."""

    async def cron_last_ticks(self) -> dict[str, int]:
        """Schedule -> due time of its last claimed tick, for every schedule ever claimed."""

    async def clock_mark(self) -> int:
        """The highest time saved by ``save_clock_mark`` on any node; 0 if none ever was."""

    async def save_clock_mark(self, now_ms: int) -> None:
        """Raise the mark to ``now_ms`` if it is lower (concurrent saves, on any nodes, keep
        the highest). Need not be durable at once: a crash loses at most the last saves."""


class Kv(Protocol):
    """KV namespaces: values by key, with an expiry and metadata each.

    Keys are kept and listed in UTF-8 byte order (code point order). The store checks no
    limits (``ocd.kv`` does, with Cloudflare's texts): it keeps what it is given. Time is
    the caller's, as everywhere: a key whose ``expires_ms <= now_ms`` is gone for every read
    at once, whether or not ``kv_expire`` has deleted it yet."""

    async def kv_get(self, ns: KvNamespace, key: str, now_ms: int) -> KvEntry | None:
        """The key's entry, or None if it was never put, was deleted or has expired."""

    async def kv_put(self, ns: KvNamespace, key: str, entry: KvEntry) -> None:
        """Set the key to ``entry``, replacing all of a previous one (value, expiry and
        metadata: a put without metadata leaves none). Durable before it returns, as a
        send is; refused with ``StoreFull`` while the disk is full."""

    async def kv_delete(self, ns: KvNamespace, key: str) -> None:
        """Delete the key (nothing if there is none), durably."""

    async def kv_list(
        self, ns: KvNamespace, now_ms: int, prefix: str, after: str | None, limit: int
    ) -> KvPage:
        """Up to ``limit`` keys starting with ``prefix`` and greater than ``after``, in
        order, without their values; expired keys left out. ``complete`` is false when
        more keys match after the page (a listing resumes with ``after`` = the last key)."""

    async def kv_expire(self, now_ms: int) -> int:
        """Delete keys expired at ``now_ms``, in bounded chunks (the retention sweep calls
        it); returns how many."""


class Store(
    Lifecycle,
    CatalogueReads,
    QueueAdmin,
    Messages,
    Browsing,
    MoveTasks,
    Coordination,
    Kv,
    Protocol,
):
    """The queue authority: every facet. See the module docstring for the rules every method
    keeps. A caller that needs less is typed with only the facets it uses."""
