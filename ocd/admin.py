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
- **Bulk moves are bounded tasks** (:class:`MoveTask`): a redrive (dead-letter queue back to
  a source, attempts reset) or a delete of selected messages or of all matching a filter
  runs in the background in chunks of ``MOVE_CHUNK``, with its upper bound fixed at start
  (the backlog then, and nothing sent after it), so a message that fails again and comes
  back is never taken twice; it reports progress and can be cancelled between chunks.

Each operation re-reads the queue from the store's catalogue first: it may have been
changed or deleted (:class:`~ocd.errors.QueueNotFound`) since the caller looked it up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ocd.clock import Clock, wall_ms
from ocd.config import Config, ConsumerConfig, QueueConfig
from ocd.errors import (
    ConsumerExists,
    ConsumerInConfig,
    ConsumerNotFound,
    DeadLetterTypeMismatch,
    FifoSettingOnStandard,
    MoveTaskRunning,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    QueueTypeChange,
    StoreConflict,
    StoreError,
)
from ocd.store import (
    FIFO_SUFFIX,
    BrowseCursor,
    BrowseQuery,
    MoveTaskRow,
    PullConsumer,
    QueueExtras,
    QueueRecord,
    QueueSettings,
    Store,
)

log = logging.getLogger(__name__)

MOVE_CHUNK = 500  # messages per transaction of a bulk move: sends and acks go between them
KEPT_TASKS = 50  # finished tasks remembered for their progress pages
MOVE_ADOPT_S = 5.0  # how often a node looks for active move tasks of nodes that died

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


class Admin:
    """Creates, changes and deletes queues and their consumers by the rules above.

    ``bound`` and ``worker_consumers`` are what this node's config file says
    (:func:`config_names`, :func:`config_consumers`); :meth:`configure` replaces both when
    the config is reloaded.
    """

    def __init__(
        self,
        store: Store,
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
        self._tasks: dict[str, MoveTask] = {}  # bulk moves, running and lately finished

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
        made: list[QueueRecord] = []
        for q in queues:
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
            made.append(await self.store.ensure_queue(q.name, q.account, settings, now))
        return made

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

    # ---------------------------------------------------------------- bulk moves (appended)

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

    def tasks(self, account: str) -> list[MoveTask]:
        """The account's tasks, running and lately finished, newest first."""
        found = [t for t in self._tasks.values() if t.account == account]
        return sorted(found, key=lambda t: (-t.started_ms, t.id))

    def task(self, account: str, task_id: str) -> MoveTask | None:
        t = self._tasks.get(task_id)
        return t if t is not None and t.account == account else None

    def _remember(self, task: MoveTask) -> None:
        self._tasks[task.id] = task
        done = sorted(
            (t for t in self._tasks.values() if t.finished_ms is not None),
            key=lambda t: t.started_ms,
        )
        for old in done[:-KEPT_TASKS]:
            self._tasks.pop(old.id, None)

    async def start_move(
        self,
        queue: QueueRecord,
        destination: QueueRecord | None,
        seqs: Sequence[int] | None = None,
        query: BrowseQuery | None = None,
        rate: int | None = None,
        dead_lettered_only: bool = False,
    ) -> MoveTask:
        """Redrive (``destination`` given) or delete (None) the messages ``seqs`` of
        ``queue``, or every message matching ``query``'s filters, as a background task
        kept in the store (so that it survives a restart: :meth:`resume_moves`). Its bound
        is fixed now: at most the queue's backlog at this moment, and only messages sent up
        to the newest one now; with ``dead_lettered_only`` (a redrive of a dead-letter
        queue) also only messages there now, not ones dead-lettered later. At most
        ``rate`` messages a second. ``MoveTaskRunning`` if the queue has a redrive
        running already."""
        current = await self.current(queue)
        if destination is not None:
            destination = await self.current(destination)
        backlog = await self.store.backlog(current)
        now = self.clock()
        newest = await self.store.browse(current, now, BrowseQuery(limit=1, newest_first=True))
        bound = BrowseCursor(newest[0].sent_ms, newest[0].seq) if newest else None
        total = min(len(set(seqs)), backlog.count) if seqs is not None else backlog.count
        spec: dict[str, object] = {}
        if seqs is not None:
            spec["seqs"] = sorted(set(seqs))
        else:
            spec["filter"] = _filter_json(query or BrowseQuery())
        if dead_lettered_only:
            spec["dead_lettered_by_ms"] = now
        row = MoveTaskRow(
            task_id=secrets.token_hex(8),
            account=current.account,
            source_id=current.queue_id,
            source=current.name,
            destination_id=destination.queue_id if destination else None,
            destination=destination.name if destination else None,
            total=total,
            started_ms=now,
            rate=rate,
            bound=bound,
            spec=json.dumps(spec, separators=(",", ":")),
        )
        try:
            await self.store.create_move_task(row, now)
        except StoreConflict:
            raise MoveTaskRunning(current.name) from None
        task = MoveTask.of(row)
        self._remember(task)
        self._launch(task, current, destination, row)
        log.info(
            "%s of %s started: up to %d message(s)",
            task.action,
            current.name,
            total,
            extra={"event": "move_started", "task": task.id, "queue": current.name,
                   "destination": task.destination, "total": total},
        )  # fmt: skip
        return task

    async def cancel_move(self, task: MoveTask) -> MoveTask:
        """Ask the task to stop after its current chunk (on whichever node runs it); what
        moved stays moved. A finished task is left as it is."""
        if task.finished_ms is not None:
            return task
        task.cancel()
        row = await self.store.set_move_task_state(task.id, "cancelling", self.clock())
        if row is not None:
            task.update(row)
        return task

    async def resume_moves(self) -> list[MoveTask]:
        """At start: remember the tasks the store keeps, and go on with the active ones no
        live node runs (this node's predecessor's, after a restart or a crash). A task whose
        queue was deleted meanwhile is failed, saying so. Returns the tasks resumed."""
        for row in await self.store.move_tasks():
            if row.task_id not in self._tasks:
                self._tasks[row.task_id] = MoveTask.of(row)
        return await self.adopt_moves()

    async def adopt_loop(self, every_s: float = MOVE_ADOPT_S) -> None:
        """Go on with active tasks whose node died (shared databases: once its heartbeat
        has lapsed and a node has reaped it), every ``every_s``."""
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(StoreError):
                await self.adopt_moves()

    async def adopt_moves(self) -> list[MoveTask]:
        """Take over and run the active tasks no live node runs; returns them."""
        resumed: list[MoveTask] = []
        for row in await self.store.adopt_move_tasks():
            task = MoveTask.of(row)
            self._tasks[task.id] = task
            source = await self.store.lookup_by_id(row.source_id)
            dest = (
                await self.store.lookup_by_id(row.destination_id)
                if row.destination_id is not None
                else None
            )
            if source is None or (row.destination_id is not None and dest is None):
                gone = row.source if source is None else row.destination
                await self._finish(task, "failed", f"Queue not found: {gone}")
                continue
            log.info(
                "%s of %s resumed (the node running it stopped): %d of at most %d message(s) done",
                task.action, task.queue, task.done, task.total,
                extra={"event": "move_resumed", "task": task.id, "done": task.done},
            )  # fmt: skip
            self._launch(task, source, dest, row)
            resumed.append(task)
        return resumed

    async def stop_moves(self) -> None:
        """Stop the tasks this node runs, as they are: the store keeps them active, and
        :meth:`resume_moves` goes on with them at the next start (on this node or
        another)."""
        runners = [t._runner for t in self._tasks.values() if t._runner is not None]
        for r in runners:
            r.cancel()
        for r in runners:
            with contextlib.suppress(BaseException):
                await r

    def _launch(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        row: MoveTaskRow,
    ) -> None:
        work = self._run_move(task, queue, destination, row)
        task._runner = asyncio.create_task(work, name=f"ocd-move-{task.id}")

    async def _finish(self, task: MoveTask, state: str, error: str | None = None) -> None:
        task.state, task.error = state, error
        task.finished_ms = self.clock()
        row = await self.store.set_move_task_state(task.id, state, task.finished_ms, error)
        if row is not None:
            task.update(row)
        log.info(
            "%s of %s %s: %d of at most %d message(s)",
            task.action,
            task.queue,
            task.state,
            task.done,
            task.total,
            extra={"event": "move_finished", "task": task.id, "state": task.state,
                   "done": task.done, "total": task.total},
        )  # fmt: skip

    async def _run_move(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        row: MoveTaskRow,
    ) -> None:
        spec = json.loads(row.spec)
        pace = _Pace(row.rate, task.done)
        try:
            if "seqs" in spec:
                after = row.cursor.seq if row.cursor is not None else 0
                todo = [int(s) for s in spec["seqs"] if int(s) > after]
                step = pace.chunk()
                i = 0
                while i < len(todo) and not task.cancel_requested and task.done < task.total:
                    chunk = todo[i : i + step]
                    i += len(chunk)
                    await self._move_chunk(
                        task, queue, destination, chunk, BrowseCursor(0, chunk[-1])
                    )
                    await pace.wait(task.done)
            elif row.bound is not None:
                query = _filter_of(spec.get("filter") or {})
                await self._move_matching(task, queue, destination, query, row, spec, pace)
            state = "cancelled" if task.cancel_requested else "completed"
            await self._finish(task, state)
        except (StoreError, QueueNotFound) as e:
            with contextlib.suppress(StoreError):
                await self._finish(task, "failed", str(e))

    async def _move_matching(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        query: BrowseQuery,
        row: MoveTaskRow,
        spec: dict[str, Any],
        pace: _Pace,
    ) -> None:
        assert row.bound is not None
        bound = tuple(row.bound)
        cursor: BrowseCursor | None = row.cursor
        by_ms = spec.get("dead_lettered_by_ms")
        while not task.cancel_requested and task.done < task.total:
            page = replace(
                query, limit=pace.chunk(), newest_first=False, after=cursor, body_bytes=0
            )
            rows = await self.store.browse(queue, self.clock(), page)
            if not rows:
                return
            cursor = BrowseCursor(rows[-1].sent_ms, rows[-1].seq)
            inside = [
                r.seq
                for r in rows
                if (r.sent_ms, r.seq) <= bound
                and not r.leased
                and (by_ms is None or r.visible_ms <= by_ms)
            ]
            picked = inside[: task.total - task.done]
            await self._move_chunk(task, queue, destination, picked, cursor)
            await pace.wait(task.done)
            if tuple(cursor) >= bound:
                return

    async def _move_chunk(
        self,
        task: MoveTask,
        queue: QueueRecord,
        destination: QueueRecord | None,
        seqs: Sequence[int],
        cursor: BrowseCursor,
    ) -> None:
        """One chunk, its progress recorded with it (a crash keeps both or neither)."""
        row = await self.store.move_task_chunk(
            task.id, queue, destination, seqs, cursor, self.clock()
        )
        task.chunks += 1
        if row is not None:
            task.update(row)
            if row.state == "cancelling":  # asked for on another node, or before a restart
                task.cancel_requested = True
        await asyncio.sleep(0)  # let sends and acks in between chunks


class _Pace:
    """Chunks no bigger than a second's worth at ``rate``, and waits that hold the task to
    ``rate`` messages a second on average (no limit without one)."""

    def __init__(self, rate: int | None, done: int) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.base = done

    def chunk(self) -> int:
        return MOVE_CHUNK if self.rate is None else max(1, min(MOVE_CHUNK, self.rate))

    async def wait(self, done: int) -> None:
        if self.rate is None:
            return
        due = self.start + (done - self.base) / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def _filter_json(q: BrowseQuery) -> dict[str, object]:
    return {
        "state": q.state,
        "min_attempts": q.min_attempts,
        "sent_from_ms": q.sent_from_ms,
        "sent_to_ms": q.sent_to_ms,
    }


def _filter_of(f: dict[str, Any]) -> BrowseQuery:
    return BrowseQuery(
        state=str(f.get("state", "any")),
        min_attempts=int(f.get("min_attempts", 0)),
        sent_from_ms=f.get("sent_from_ms"),
        sent_to_ms=f.get("sent_to_ms"),
    )


@dataclass(eq=False)
class MoveTask:
    """A bulk redrive or delete running in the background (see :meth:`Admin.start_move`);
    the store keeps it too (``MoveTaskRow``), so that it survives a restart."""

    id: str
    account: str
    queue: str
    destination: str | None  # None: a delete
    total: int  # the upper bound, fixed at start
    started_ms: int
    done: int = 0
    chunks: int = 0
    state: str = "running"  # running -> cancelling -> completed | cancelled | failed
    error: str | None = None
    finished_ms: int | None = None
    cancel_requested: bool = False
    rate: int | None = None  # messages per second at most
    queue_id: str = ""
    destination_id: str | None = None
    _runner: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, row: MoveTaskRow) -> MoveTask:
        return cls(
            id=row.task_id,
            account=row.account,
            queue=row.source,
            destination=row.destination,
            total=row.total,
            started_ms=row.started_ms,
            done=row.done,
            state=row.state,
            error=row.error,
            finished_ms=row.finished_ms,
            cancel_requested=row.state == "cancelling",
            rate=row.rate,
            queue_id=row.source_id,
            destination_id=row.destination_id,
        )

    def update(self, row: MoveTaskRow) -> None:
        self.done, self.state, self.error = row.done, row.state, row.error
        self.finished_ms = row.finished_ms

    @property
    def action(self) -> str:
        return "delete" if self.destination is None else "redrive"

    def cancel(self) -> None:
        """Stop after the chunk in progress; what moved stays moved."""
        self.cancel_requested = True
        if self.state == "running":
            self.state = "cancelling"

    def json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "action": self.action,
            "queue": self.queue,
            "destination": self.destination,
            "total": self.total,
            "done": self.done,
            "state": self.state,
            "error": self.error,
            "rate": self.rate,
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
        }
