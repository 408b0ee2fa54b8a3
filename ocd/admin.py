"""Queue and consumer administration: the rules every surface shares.

The Cloudflare REST API, the daemon (queues the config declares, at start and reload) and
pull (a missing dead-letter queue) all change queues and consumers through :class:`Admin`,
so the rules live once:

- **Names are unique per account**, and the database is the only judge: a create or rename
  to a taken name fails with ``StoreConflict`` there (of two concurrent creates, on any
  nodes, one wins), which becomes :class:`~ocd.errors.QueueExists` here.
- **What the config file names stays**: a queue a worker binds (as producer, consumer or
  dead-letter queue) or a ``[[queues]]`` entry declares cannot be deleted or renamed over
  the API (:class:`~ocd.errors.QueueInUse`); a worker consumer is changed in the config file,
  not over the API (:class:`~ocd.errors.ConsumerInConfig`).
- **One consumer per queue**: a worker from the config, or one HTTP pull consumer
  (:class:`~ocd.errors.ConsumerExists`).
- **A missing dead-letter queue is created**, as Cloudflare does, when a consumer names it
  and again when a message is dead-lettered to it (it may have been deleted since).
- **A queue keeps its type**: FIFO queues are the names ending in ``.fifo``; a rename never
  crosses that line (:class:`~ocd.errors.QueueTypeChange`), a FIFO queue's dead-letter
  queue is FIFO and a standard queue's standard
  (:class:`~ocd.errors.DeadLetterTypeMismatch`), and the FIFO-only settings keep their
  defaults on a standard queue (:class:`~ocd.errors.FifoSettingOnStandard`). The config
  file is held to the same rules when it is loaded.
- **Bulk moves are bounded tasks** (:mod:`ocd.moves`), started and listed through
  ``Admin.moves``.

Each operation re-reads the queue from the store's catalogue first: it may have been
changed or deleted (:class:`~ocd.errors.QueueNotFound`) since the caller looked it up.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ocd.clock import Clock, wall_ms
from ocd.config import Config, ConsumerConfig, QueueConfig
from ocd.errors import (
    ConsumerExists,
    ConsumerInConfig,
    ConsumerNotFound,
    DeadLetterTypeMismatch,
    FifoSettingOnStandard,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    QueueTypeChange,
    StoreConflict,
)
from ocd.moves import MOVE_ADOPT_S, Moves, MovesStore, MoveTask
from ocd.store import (
    FIFO_SUFFIX,
    BrowseQuery,
    PullConsumer,
    QueueAdmin,
    QueueExtras,
    QueueRecord,
    QueueSettings,
)

log = logging.getLogger(__name__)

ENSURE_AT_ONCE = 16  # config queues created at once at a start


QueueKey = tuple[str, str]  # (account, queue name)


@dataclass(frozen=True, slots=True)
class WorkerConsumer:
    """A queue's consumer that lives in the config file."""

    worker: str
    consumer: ConsumerConfig


def config_names(config: Config) -> dict[QueueKey, list[str]]:
    """(account, queue) -> what in the config file names it: ``"worker <name>"`` for a
    worker that binds it in any way (also as a dead-letter queue), ``"[[queues]]"`` for a
    declaration."""
    named: dict[QueueKey, list[str]] = {}
    for w in config.workers:
        queues = [p.queue for p in w.producers] + [c.queue for c in w.consumers]
        queues += [c.dead_letter_queue for c in w.consumers if c.dead_letter_queue]
        for name in dict.fromkeys(queues):
            named.setdefault((w.account, name), []).append(f"worker {w.name}")
    for q in config.queues:
        if q.declared:
            named.setdefault((q.account, q.name), []).append("[[queues]]")
    return named


def config_consumers(config: Config) -> dict[QueueKey, WorkerConsumer]:
    """(account, queue) -> the worker consumer the config file gives it."""
    return {
        (w.account, c.queue): WorkerConsumer(w.name, c) for w in config.workers for c in w.consumers
    }


def is_fifo(name: str) -> bool:
    """Whether a queue of this name is a FIFO queue (``QueueRecord.fifo``, by name alone)."""
    return name.endswith(FIFO_SUFFIX)


def check_settings(name: str, settings: QueueSettings) -> None:
    """``FifoSettingOnStandard`` if a standard queue would get a FIFO-only setting."""
    if is_fifo(name):
        return
    default = QueueSettings()
    if settings.content_based_deduplication != default.content_based_deduplication:
        raise FifoSettingOnStandard(name, "content_based_deduplication")
    if settings.deduplication_scope != default.deduplication_scope:
        raise FifoSettingOnStandard(name, "deduplication_scope")


def check_rename(name: str, new_name: str) -> None:
    """``QueueTypeChange`` if the rename would change the queue's type."""
    if is_fifo(name) != is_fifo(new_name):
        raise QueueTypeChange(name, new_name)


def check_dead_letter(name: str, dead_letter_queue: str) -> None:
    """``DeadLetterTypeMismatch`` unless both queues are FIFO or both standard."""
    if is_fifo(name) != is_fifo(dead_letter_queue):
        raise DeadLetterTypeMismatch(name, dead_letter_queue)


def worker_consumer_id(queue: QueueRecord, worker: str) -> str:
    """A stable id for a consumer that lives in the config file."""
    return hashlib.sha256(f"{queue.queue_id}/{worker}".encode()).hexdigest()[:32]


class AdminStore(MovesStore, QueueAdmin, Protocol):
    """What administration uses of the store: queue and consumer writes, the catalogue,
    purges, and (handed to its ``Moves``) browsing and move tasks. Five of the seven facets:
    all but the daemon's ``Lifecycle`` and the nodes' ``Coordination``."""


class Admin:
    """Creates, changes and deletes queues and their consumers by the rules above.

    ``bound`` and ``worker_consumers`` are what this node's config file says
    (:func:`config_names`, :func:`config_consumers`); :meth:`configure` replaces both when
    the config is reloaded.
    """

    def __init__(
        self,
        store: AdminStore,
        clock: Clock = wall_ms,
        bound: dict[QueueKey, list[str]] | None = None,
        worker_consumers: dict[QueueKey, WorkerConsumer] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.bound = dict(bound or {})
        self.worker_consumers = dict(worker_consumers or {})
        # A courtesy of this process only, not the guarantee of anything across nodes: it
        # serialises this node's read-modify-writes, so that two PATCHes of different
        # settings sent to one node both take effect and of two consumer creates on one
        # node one gets ConsumerExists. Across nodes the database decides: names are its
        # unique constraint; two PATCHes on two nodes are last-writer-wins on the whole
        # settings row (as in Cloudflare's API); two consumer creates on two nodes leave one
        # consumer (the store keeps one per queue) with the later one's settings.
        self._lock = asyncio.Lock()
        self.moves = Moves(store, clock, self.current)  # bulk moves (ocd.moves)

    def configure(self, config: Config) -> None:
        """Take what a (re)loaded config file names and which consumers it declares."""
        self.bound = config_names(config)
        self.worker_consumers = config_consumers(config)

    # ---------------------------------------------------------------- what the config says

    def named_by(self, queue: QueueRecord) -> list[str]:
        """What in the config file names this queue; empty if nothing does."""
        return self.bound.get((queue.account, queue.name), [])

    def worker_consumer(self, queue: QueueRecord) -> WorkerConsumer | None:
        return self.worker_consumers.get((queue.account, queue.name))

    # ---------------------------------------------------------------- queues

    async def current(self, queue: QueueRecord) -> QueueRecord:
        """``queue`` as the catalogue has it now (the database is asked on a miss: made a
        moment ago, perhaps on another node); ``QueueNotFound`` if it was deleted."""
        found = await self.store.lookup_by_id(queue.queue_id)
        if found is None:
            raise QueueNotFound(queue.name)
        return found

    async def create_queue(self, account: str, name: str, settings: QueueSettings) -> QueueRecord:
        """A new queue; ``QueueExists`` if the account has one of that name,
        ``FifoSettingOnStandard`` for FIFO settings on a standard queue."""
        check_settings(name, settings)
        try:
            return await self.store.create_queue(name, account, settings, self.clock())
        except StoreConflict:
            raise QueueExists(account, name) from None

    async def change_queue(
        self,
        queue: QueueRecord,
        settings: QueueSettings | Callable[[QueueSettings], QueueSettings],
        new_name: str | None = None,
    ) -> QueueRecord:
        """Replace the queue's settings, or derive them from the current ones (a function of
        them: PATCH), and rename it to ``new_name``. ``QueueInUse`` for a rename of a queue
        the config names, ``QueueTypeChange`` for one that would change its type,
        ``FifoSettingOnStandard`` for FIFO settings on a standard queue, ``QueueExists`` if
        the new name is taken, ``QueueNotFound`` if the queue was deleted."""
        async with self._lock:
            current = await self.current(queue)
            new = settings(current.settings) if callable(settings) else settings
            name = current.name if new_name is None else new_name
            rename = name != current.name
            if rename:
                check_rename(current.name, name)
                named = self.named_by(current)
                if named:
                    raise QueueInUse(current.name, named, "renamed")
            check_settings(name, new)  # for the name the queue will have
            try:
                return await self.store.update_queue(
                    current, new, self.clock(), name if rename else None
                )
            except StoreConflict:
                raise QueueExists(current.account, name) from None

    async def delete_queue(self, queue: QueueRecord) -> None:
        """Delete the queue, its messages and its pull consumer; ``QueueInUse`` if the
        config names it."""
        current = await self.current(queue)
        named = self.named_by(current)
        if named:
            raise QueueInUse(current.name, named, "deleted")
        await self.store.delete_queue(current)

    async def purge(self, queue: QueueRecord) -> QueueRecord:
        """Delete every message of the queue; returns the queue with its purge time."""
        await self.store.purge(await self.current(queue), self.clock())
        return self.store.queue_by_id(queue.queue_id) or queue

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        """Replace a queue's SQS tags and unmapped SQS attributes, durably."""
        await self.store.set_queue_extras(await self.current(queue), extras)

    async def dead_letter(self, account: str, name: str) -> QueueRecord:
        """The dead-letter queue ``name`` of ``account``, created if it is missing.
        ``ensure_queue`` is idempotent and safe under concurrency, on any nodes."""
        found = self.store.queue(name, account)
        if found is not None:
            return found
        return await self.store.ensure_queue(name, account, None, self.clock())

    async def ensure_config_queues(self, queues: Iterable[QueueConfig]) -> list[QueueRecord]:
        """Create every queue the config names and is missing; a ``[[queues]]`` declaration
        also sets its queue's settings (a queue only named by a worker keeps its own)."""
        now = self.clock()
        # Several at a time: their commits share a sync (SQLite's group commit, concurrent
        # PostgreSQL sessions), so that a first start with 10,000 queues takes seconds.
        turns = asyncio.Semaphore(ENSURE_AT_ONCE)

        async def ensure(q: QueueConfig) -> QueueRecord:
            settings = (
                QueueSettings(
                    q.delivery_delay_s,
                    q.message_retention_period_s,
                    q.delivery_paused,
                    q.content_based_deduplication,
                    q.deduplication_scope,
                )
                if q.declared
                else None
            )
            async with turns:
                return await self.store.ensure_queue(q.name, q.account, settings, now)

        return list(await asyncio.gather(*(ensure(q) for q in queues)))

    # ---------------------------------------------------------------- consumers

    async def create_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        """Give the queue its pull consumer; ``ConsumerExists`` if it has one already (a
        worker from the config, or a pull consumer), ``DeadLetterTypeMismatch`` if its
        dead-letter queue is not of the queue's type."""
        async with self._lock:
            current = await self.current(queue)
            if self.worker_consumer(current) is not None or self.store.pull_consumer(current):
                raise ConsumerExists(current.name)
            return await self._put(current, consumer)

    async def put_consumer(
        self, queue: QueueRecord, consumer: PullConsumer, consumer_id: str | None = None
    ) -> PullConsumer:
        """Update the queue's pull consumer, or create it. With ``consumer_id``, an existing
        consumer of another id is ``ConsumerNotFound``; a worker consumer is
        ``ConsumerInConfig``; a dead-letter queue of the other type is
        ``DeadLetterTypeMismatch``."""
        async with self._lock:
            current = await self.current(queue)
            wc = self.worker_consumer(current)
            if wc is not None:
                raise ConsumerInConfig(current.name, wc.worker, "changed")
            existing = self.store.pull_consumer(current)
            if existing is not None and consumer_id not in (None, existing.consumer_id):
                raise ConsumerNotFound(current.name, consumer_id)
            return await self._put(current, consumer)

    async def _put(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        if consumer.dead_letter_queue:  # like Cloudflare, a missing dead-letter queue is made
            check_dead_letter(queue.name, consumer.dead_letter_queue)
            await self.dead_letter(queue.account, consumer.dead_letter_queue)
        return await self.store.put_pull_consumer(queue, consumer)

    async def delete_consumer(self, queue: QueueRecord, consumer_id: str) -> None:
        """Remove the queue's pull consumer ``consumer_id``: ``ConsumerNotFound`` if it has
        none of that id, ``ConsumerInConfig`` if that is its worker consumer."""
        current = await self.current(queue)
        wc = self.worker_consumer(current)
        if wc is not None:
            if worker_consumer_id(current, wc.worker) == consumer_id:
                raise ConsumerInConfig(current.name, wc.worker, "removed")
            raise ConsumerNotFound(current.name, consumer_id)
        existing = self.store.pull_consumer(current)
        if existing is None or existing.consumer_id != consumer_id:
            raise ConsumerNotFound(current.name, consumer_id)
        await self.store.delete_pull_consumer(current)

    # ---------------------------------------------------------------- bulk moves

    def dead_letter_sources(self, queue: QueueRecord) -> list[str]:
        """Names of the queues of ``queue``'s account whose consumer dead-letters to it."""
        names = [
            k[1]
            for k, wc in self.worker_consumers.items()
            if k[0] == queue.account and wc.consumer.dead_letter_queue == queue.name
        ]
        for q in self.store.queues():
            pc = self.store.pull_consumer(q) if q.account == queue.account else None
            if pc is not None and pc.dead_letter_queue == queue.name:
                names.append(q.name)
        return sorted(set(names))

    # ------------------------------------------------------------ bulk moves (ocd.moves)

    def tasks(self, account: str) -> list[MoveTask]:
        return self.moves.tasks(account)

    def task(self, account: str, task_id: str) -> MoveTask | None:
        return self.moves.task(account, task_id)

    async def start_move(
        self,
        queue: QueueRecord,
        destination: QueueRecord | None,
        seqs: Sequence[int] | None = None,
        query: BrowseQuery | None = None,
        rate: int | None = None,
        dead_lettered_only: bool = False,
    ) -> MoveTask:
        return await self.moves.start_move(
            queue, destination, seqs, query, rate, dead_lettered_only
        )

    async def cancel_move(self, task: MoveTask) -> MoveTask:
        return await self.moves.cancel_move(task)

    async def resume_moves(self) -> list[MoveTask]:
        return await self.moves.resume_moves()

    async def adopt_loop(self, every_s: float = MOVE_ADOPT_S) -> None:
        await self.moves.adopt_loop(every_s)

    async def adopt_moves(self) -> list[MoveTask]:
        return await self.moves.adopt_moves()

    async def stop_moves(self) -> None:
        await self.moves.stop_moves()
