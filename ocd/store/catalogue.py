"""What a node knows of its queues without a read: the catalogue both backends compose.

The queues of every account (by name, key and id), their pull consumers, each queue's
backlog as last known (count, bytes, and the send time of its oldest message when known)
and the wake-up events dispatchers wait on. A backend owns the truth in its database and
tells the catalogue what it committed; the catalogue never reads anything itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from ocd.store.values import Backlog, PullConsumer, QueueRecord


class Catalogue:
    def __init__(self, on_watch: Callable[[int], None] | None = None) -> None:
        self._by_name: dict[tuple[str, str], QueueRecord] = {}
        self._sorted: list[QueueRecord] | None = None  # queues(), until the next change
        self._fifo: bool | None = None  # any_fifo(), until the next change
        self._by_key: dict[int, QueueRecord] = {}
        self._by_id: dict[str, QueueRecord] = {}
        self._consumers: dict[int, PullConsumer] = {}  # queue key -> its pull consumer
        self._counts: dict[int, list[int]] = {}  # queue key -> [messages, bytes]
        # The keys whose count is above 0, kept at each change: the retention sweep asks
        # for them every few seconds, and a walk of 10,000 idle queues' counts was most of
        # what an idle daemon did.
        self._nonempty: set[int] = set()
        self._oldest: dict[int, int] = {}  # queue key -> send time of its oldest, 0 if empty
        self._events: dict[int, asyncio.Event] = {}
        # Called when a queue gets its first watcher: a shared database starts listening.
        self.on_watch = on_watch
        # Raised by every change this node makes, so that a snapshot read meanwhile (another
        # node's view of the catalogue) can tell it is older than memory.
        self.version = 0

    # ---------------------------------------------------------------- reads

    def queues(self) -> list[QueueRecord]:
        """Every queue of every account, sorted by (account, name)."""
        if self._sorted is None:  # sorted once a change, not once a call (10,000 queues)
            self._sorted = sorted(self._by_name.values(), key=lambda q: (q.account, q.name))
        return list(self._sorted)

    def any_fifo(self) -> bool:
        """Whether any queue is a FIFO queue (worked out once a change)."""
        if self._fifo is None:
            self._fifo = any(q.fifo for q in self._by_key.values())
        return self._fifo

    def with_messages(self) -> set[int]:
        """The keys of the queues whose backlog, as last known, is not empty."""
        return set(self._nonempty)

    def queue(self, name: str, account: str = "local") -> QueueRecord | None:
        return self._by_name.get((account, name))

    def queue_by_id(self, queue_id: str) -> QueueRecord | None:
        return self._by_id.get(queue_id)

    def by_key(self, key: int) -> QueueRecord | None:
        return self._by_key.get(key)

    def knows(self, key: int) -> bool:
        return key in self._by_key

    def pull_consumer(self, queue: QueueRecord) -> PullConsumer | None:
        return self._consumers.get(queue.key)

    # ---------------------------------------------------------------- changes

    def remember(self, q: QueueRecord) -> None:
        """Add or replace a queue; a rename forgets the old name."""
        self.version += 1
        old = self._by_key.get(q.key)
        if old is not None:
            self._by_name.pop((old.account, old.name), None)
        self._by_name[(q.account, q.name)] = q
        self._sorted = self._fifo = None
        self._by_key[q.key] = q
        self._by_id[q.queue_id] = q
        self._counts.setdefault(q.key, [0, 0])

    def forget(self, q: QueueRecord) -> None:
        """Drop a deleted queue, its consumer and its counts, and wake its watchers."""
        self.version += 1
        self._by_name.pop((q.account, q.name), None)
        self._sorted = self._fifo = None
        self._by_key.pop(q.key, None)
        self._by_id.pop(q.queue_id, None)
        self._consumers.pop(q.key, None)
        self._counts.pop(q.key, None)
        self._nonempty.discard(q.key)
        self._oldest.pop(q.key, None)
        self.notify(q.key)

    def put_consumer(self, consumer: PullConsumer) -> None:
        self.version += 1
        self._consumers[consumer.queue_key] = consumer

    def drop_consumer(self, queue: QueueRecord) -> None:
        self.version += 1
        self._consumers.pop(queue.key, None)

    def replace(
        self,
        queues: Iterable[QueueRecord],
        consumers: Iterable[PullConsumer],
        counts: dict[int, int],
    ) -> None:
        """Take a whole snapshot read from the database; wakes the watchers of every queue
        that changed (paused, resumed, renamed), so that dispatchers look again."""
        qs = list(queues)
        changed = {q.key for q in qs if self._by_key.get(q.key) != q}
        self._by_name = {(q.account, q.name): q for q in qs}
        self._sorted = self._fifo = None
        self._by_key = {q.key: q for q in qs}
        self._by_id = {q.queue_id: q for q in qs}
        self._consumers = {c.queue_key: c for c in consumers}
        self._counts = {key: [n, 0] for key, n in counts.items()}
        self._nonempty = {key for key, n in counts.items() if n > 0}
        for key in changed:
            self.notify(key)

    # ---------------------------------------------------------------- backlogs

    def count(self, key: int) -> int:
        """The queue's backlog count as last known to this node."""
        c = self._counts.get(key)
        return c[0] if c is not None else 0

    def counts(self, key: int) -> tuple[int, int]:
        """The queue's backlog as last known to this node: messages and bytes."""
        c = self._counts.get(key)
        return (c[0], c[1]) if c is not None else (0, 0)

    def set_counts(self, key: int, count: int, size: int, oldest_ms: int | None) -> None:
        self._counts[key] = [count, size]
        self._counted(key, count)
        if oldest_ms is not None:
            self._oldest[key] = oldest_ms

    def set_count(self, key: int, count: int) -> None:
        c = self._counts.setdefault(key, [0, 0])
        c[0] = max(count, 0)
        self._counted(key, c[0])

    def took(self, key: int, count: int) -> None:
        """``count`` messages of the queue are gone (acked, moved, expired): never below 0."""
        self.set_count(key, self.count(key) - count)

    def add(self, key: int, count: int, size: int) -> None:
        c = self._counts.setdefault(key, [0, 0])
        c[0] += count
        c[1] += size
        self._counted(key, c[0])

    def _counted(self, key: int, count: int) -> None:
        if count > 0:
            self._nonempty.add(key)
        else:
            self._nonempty.discard(key)

    def oldest(self, key: int) -> int | None:
        """The send time of the queue's oldest message; 0 if empty; None if not known."""
        return self._oldest.get(key)

    def set_oldest(self, key: int, oldest_ms: int) -> None:
        self._oldest[key] = oldest_ms

    def backlog(self, key: int) -> Backlog | None:
        """The backlog from memory; None if the oldest message's time has to be read."""
        count, size = self._counts.get(key, (0, 0))
        if count <= 0:
            return Backlog(0, 0, 0)
        oldest = self._oldest.get(key)
        return None if oldest is None else Backlog(count, size, oldest)

    # ---------------------------------------------------------------- wake-ups

    def watch(self, queue: QueueRecord) -> asyncio.Event:
        """An event set at the next ``notify`` of the queue."""
        ev = self._events.get(queue.key)
        if ev is None:
            ev = self._events[queue.key] = asyncio.Event()
            if self.on_watch is not None:
                self.on_watch(queue.key)
        return ev

    def notify(self, key: int) -> None:
        ev = self._events.pop(key, None)
        if ev is not None:
            ev.set()

    def notify_all(self) -> None:
        for key in list(self._events):
            self.notify(key)

    def watched(self) -> list[int]:
        return list(self._events)


class FromCatalogue:
    """The reads of ``CatalogueReads`` that a backend answers from its ``catalogue`` alone
    (``lookup`` and ``lookup_by_id`` are the backend's own: they may ask the database)."""

    catalogue: Catalogue

    def queues(self) -> list[QueueRecord]:
        """Every queue of every account, sorted by (account, name)."""
        return self.catalogue.queues()

    def queue(self, name: str, account: str = "local") -> QueueRecord | None:
        return self.catalogue.queue(name, account)

    def queue_by_id(self, queue_id: str) -> QueueRecord | None:
        return self.catalogue.queue_by_id(queue_id)

    def pull_consumer(self, queue: QueueRecord) -> PullConsumer | None:
        return self.catalogue.pull_consumer(queue)

    def backlog_count(self, queue: QueueRecord) -> int:
        return self.catalogue.count(queue.key)

    def watch(self, queue: QueueRecord) -> asyncio.Event:
        """An event set at the next commit, on any node, that may make messages of
        ``queue`` ready."""
        return self.catalogue.watch(queue)
