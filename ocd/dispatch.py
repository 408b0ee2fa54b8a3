"""Push delivery: one Dispatcher per consumer.

A batch goes out when ``max_batch_size`` messages are ready, or when the longest-waiting
ready message has waited ``max_batch_timeout``. The dispatcher sleeps on store commits and
on the next time something becomes due, never on a per-message timer.

One batch: claim (the attempt counts now), then ``ocd.pipeline``: decode per message ->
invoke (the handler kind's) -> decide (pure, ``ocd.decide``) -> settle (shielded from
cancellation) -> log. The store holds the leases (``_StoreLeases``). Failures of ocd's own
between claim and settle spend the attempt, and the dispatcher backs off before its next
claim (``pipeline.Faults``), logging once per burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ocd import deadletters
from ocd.clock import Clock, wall_ms
from ocd.deadletters import Dead
from ocd.decide import spend
from ocd.errors import StoreError, StoreFull, StoreUnavailable
from ocd.metrics import Metrics
from ocd.pipeline import (
    ABORTED,
    HANDED_BACK,
    OK,
    RETRIED,
    UNREACHED,
    UNRECORDED,
    Backoff,
    Delivered,
    Faults,
    Invoke,
    Route,
    Settlement,
    deliver,
)
from ocd.producer import metrics_dict
from ocd.python_handler import PythonInvoke, QueueCall
from ocd.store import (
    Backlog,
    CatalogueReads,
    Claim,
    DeadLetter,
    Delivery,
    Messages,
    QueueRecord,
    Settled,
)

log = logging.getLogger(__name__)

AUTOSCALE_CAP = 10  # concurrent batches per consumer when max_concurrency is unset
LEASE_GRACE_MS = 60_000
IDLE_RECHECK_S = 30.0  # fallback re-check when nothing wakes us (clock jumps, missed notify)
RACE_RECHECK_S = 0.05  # re-check after another node claimed what we saw ready
CAPPED_RECHECK_S = 1.0  # re-check of a consumer whose max_concurrency other nodes fill
LOOK_AHEAD_BATCHES = 10  # full batches one look at a standard queue may count, to start unasked
PERSIST_FOR_S = 300.0  # how long a batch's outcome is retried while the database is away

T = TypeVar("T")


class DispatchStore(CatalogueReads, Messages, Protocol):
    """What a dispatcher uses of the store: its queue (and dead-letter queue) from the
    catalogue, its wake-ups, and ready/claim/settle/release/backlog."""


class HandlerKind(Protocol):
    """A kind of consumer (in-process Python, workerd, ...): how a batch's handler runs."""

    def invoke(self, route: Route, timeout_s: float, abort: asyncio.Event) -> Invoke: ...


class PythonHandler:
    """The in-process kind: a bound ``queue(batch, env, ctx)``."""

    def __init__(self, call: QueueCall) -> None:
        self.call = call

    def invoke(self, route: Route, timeout_s: float, abort: asyncio.Event) -> Invoke:
        return PythonInvoke(self.call, timeout_s, abort, route.worker, route.queue)


@dataclass(frozen=True, slots=True)
class ConsumerPolicy:
    queue: str
    account: str
    max_batch_size: int = 10
    max_batch_timeout_s: float = 5.0
    max_retries: int = 3
    dead_letter_queue: str | None = None
    max_concurrency: int | None = None
    retry_delay_s: int = 0
    handler_timeout_s: float = 900.0


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        worker: str,
        policy: ConsumerPolicy,
        kind: HandlerKind,
        clock: Clock = wall_ms,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.worker = worker
        self.policy = policy
        self.kind = kind
        self.clock = clock
        self._inflight: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()  # a batch finished, or we are stopping
        self._stopping = False
        self._abort = asyncio.Event()
        self._last_failed = False
        # Full batches the last look at a standard queue saw beyond the one it started:
        # each later turn claims one without looking again (a look and a claim are two
        # round trips to the database and two turns of a busy event loop).
        self._seen_full = 0
        self.last_outcome: dict[str, Any] | None = None
        self._faults = Faults()

    # ---------------------------------------------------------------- the loop

    async def run(self) -> None:
        """Dispatch until stopped. While the database is unavailable, dispatch pauses and
        tries again with backoff instead of ending (the daemon keeps serving)."""
        backoff = Backoff()
        paused_since: float | None = None
        while not self._stopping:
            try:
                await self._turn()
            except StoreError as e:
                delay = backoff.next()
                if paused_since is None:  # one line per outage, not one per retry
                    paused_since = time.monotonic()
                    log.warning(
                        "queue %s: dispatch paused, retrying every few seconds: %s",
                        self.policy.queue,
                        e,
                        extra={"event": "dispatch_paused", "queue": self.policy.queue},
                    )
                await self._sleep(None, delay)
            else:
                backoff.reset()
                if paused_since is not None:
                    log.info(
                        "queue %s: dispatch resumed after %.1f s",
                        self.policy.queue,
                        time.monotonic() - paused_since,
                        extra={"event": "dispatch_resumed", "queue": self.policy.queue},
                    )
                    paused_since = None

    async def _turn(self) -> None:
        """One look at the queue: start a batch, or sleep until something may be due."""
        p = self.policy
        if self._stopping:
            return
        self._changed.clear()
        hold_s = self._faults.hold_until - time.monotonic()
        if hold_s > 0:  # backing off after a failure of ocd's own
            await self._sleep(None, hold_s)
            return
        # the catalogue, or the database for a queue another node made a moment ago
        q = self.store.queue(p.queue, p.account) or await self.store.lookup(p.queue, p.account)
        if q is None:
            await self._sleep(None, IDLE_RECHECK_S)
            return
        woken = self.store.watch(q)
        if self.store.known_empty(q):  # nothing to read for: sleep until a send wakes us
            await self._sleep(woken, None)
            return
        if q.settings.delivery_paused:
            await self._sleep(woken, IDLE_RECHECK_S)
            return
        cap = p.max_concurrency or AUTOSCALE_CAP
        if len(self._inflight) >= cap:
            await self._sleep(None, IDLE_RECHECK_S)
            return
        now = self.clock()
        if self._seen_full and not self._last_failed:
            self._seen_full -= 1
            if await self._claim_and_start(q, now):
                return
        self._seen_full = 0
        # A standard queue is counted up to as many full batches as there are free slots:
        # those beyond the first start on the next turns unasked. A FIFO queue's count
        # includes messages of groups the first batch will hold, so it looks every time.
        ahead = 1 if q.fifo else min(cap - len(self._inflight), LOOK_AHEAD_BATCHES)
        ready = await self.store.ready(q, now, p.max_batch_size * ahead)
        full = ready.count >= p.max_batch_size
        due: int | None = ready.next_visible_ms
        go = full
        if not full and ready.first_ready_ms is not None:
            timeout_at = ready.first_ready_ms + int(p.max_batch_timeout_s * 1000)
            go = now >= timeout_at
            due = timeout_at if due is None else min(due, timeout_at)
        if go and self._inflight and p.max_concurrency is None:
            # Autoscaling adds a concurrent batch only for a full one, and not while
            # the last batch failed. Held back, wait for a batch to finish or a commit
            # (the timeout has passed already: waiting on it would spin).
            go = full and not self._last_failed
            if not go:
                due = ready.next_visible_ms
        if not go:
            if due is None and ready.count == 0:
                # Nothing ready and nothing due: only a commit, which wakes us, can change
                # that (10,000 idle queues looking every IDLE_RECHECK_S were 330 reads/s).
                await self._sleep(woken, None)
                return
            wait_s = IDLE_RECHECK_S if due is None else max(0.0, (due - now) / 1000)
            await self._sleep(woken, min(wait_s, IDLE_RECHECK_S))
            return
        hold_s = self._faults.hold_until - time.monotonic()
        if hold_s > 0:  # a batch failed inside ocd while this turn looked
            await self._sleep(None, hold_s)
            return
        if full:
            self._seen_full = ready.count // p.max_batch_size - 1
        if not await self._claim_and_start(q, now):
            # Another node took the batch, or (capped) holds every slot: their settles
            # wake us, but a node that dies wakes no one, so also look again soon.
            capped = p.max_concurrency is not None
            await self._sleep(woken, CAPPED_RECHECK_S if capped else RACE_RECHECK_S)

    async def _sleep(self, woken: asyncio.Event | None, timeout_s: float | None) -> None:
        waits = [asyncio.ensure_future(self._changed.wait())]
        if woken is not None:
            waits.append(asyncio.ensure_future(woken.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _claim_and_start(self, q: QueueRecord, now: int) -> bool:
        """Claim a batch and start it; whether there was one."""
        p = self.policy
        lease_until = now + int(p.handler_timeout_s * 1000) + LEASE_GRACE_MS
        ask = Claim(
            limit=p.max_batch_size,
            now_ms=now,
            lease_until_ms=lease_until,
            max_attempts=p.max_retries + 1,
            dead_letter=self._dead_letter(),
            max_batches=p.max_concurrency,  # a limit for the whole deployment
        )
        # The batch's metadata is read beside the claim rather than after it: one round
        # trip off the batch's way (a claim changes none of the figures it reads).
        metrics = asyncio.ensure_future(self._backlog(q))
        try:
            claimed = await self.store.claim(q, ask)
        except BaseException:
            _drop(metrics)
            raise
        if len(claimed.deliveries) < p.max_batch_size:  # what was seen is taken
            self._seen_full = 0
        deadletters.tell(
            self.metrics,
            q,
            p.dead_letter_queue,
            (Dead(mid, ask.max_attempts) for mid in claimed.exhausted),
        )
        if not claimed.deliveries:
            _drop(metrics)
            return bool(claimed.exhausted)
        task = asyncio.create_task(
            self._guarded(q, claimed.deliveries, metrics),
            name=f"ocd-batch-{self.worker}-{q.name}",
        )
        self._inflight.add(task)
        task.add_done_callback(self._finished)
        return True

    async def _persist(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run a settle or release, trying again while the database is unavailable: the
        handler's verdict is kept rather than left for the lease to lapse (which would
        deliver acked messages again)."""
        backoff = Backoff()
        deadline = time.monotonic() + PERSIST_FOR_S
        logged = False
        while True:
            try:
                return await op()
            except (StoreUnavailable, StoreFull) as e:
                if time.monotonic() > deadline:
                    raise
                delay = backoff.next()
                if not logged:  # once per batch, not once per retry
                    logged = True
                    log.warning(
                        "queue %s: could not record a batch's outcome, retrying: %s",
                        self.policy.queue,
                        e,
                        extra={"event": "settle_retrying", "queue": self.policy.queue},
                    )
                await asyncio.sleep(delay)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._changed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "batch task for queue %s failed", self.policy.queue, exc_info=task.exception()
            )

    def _dead_letter(self) -> DeadLetter:
        name = self.policy.dead_letter_queue
        return DeadLetter(self.store.queue(name, self.policy.account) if name else None)

    # ---------------------------------------------------------------- one batch

    async def _guarded(
        self,
        q: QueueRecord,
        deliveries: list[Delivery],
        metrics: asyncio.Future[dict[str, Any]],
    ) -> None:
        """One batch through the pipeline. A failure of ocd's own has already been settled
        as a failed delivery there (attempts spent); what reaches here is an outcome that
        could not be recorded: its messages come back when their leases lapse. Either way
        the dispatcher backs off before its next claim."""
        p = self.policy
        route = Route(q.name, self.worker, q.fifo, p.retry_delay_s, p.dead_letter_queue, q.account)
        invoke = self.kind.invoke(route, p.handler_timeout_s, self._abort)
        leases = _StoreLeases(self, q, p)

        def fault(e: BaseException) -> None:
            self._faults.failed(q.name, e, RETRIED)

        try:
            result = await deliver(route, deliveries, invoke, leases, lambda: metrics, fault)
        except StoreError as e:
            # The database failed the settle (and not only for a while): outside the
            # messages, so they are handed back unspent once it answers again, rather than
            # left leased until the lease lapses. Only still-leased ones are touched.
            self._faults.failed(q.name, e, HANDED_BACK)
            with contextlib.suppress(StoreError):
                await asyncio.shield(leases.give_back(deliveries))
            return
        except Exception as e:  # a bug in recording the outcome: the leases lapse
            self._faults.failed(q.name, e, UNRECORDED)
            return
        finally:
            _drop(metrics)  # not awaited when no message reached the handler
        self._record(q, result)

    async def _backlog(self, q: QueueRecord) -> dict[str, Any]:
        try:
            backlog = await self.store.backlog(q)
        except StoreError:  # the batch's metadata is not worth holding its messages
            backlog = Backlog(self.store.backlog_count(q), 0, 0)
        return metrics_dict(backlog)

    def _record(self, q: QueueRecord, r: Delivered) -> None:
        if r.outcome == ABORTED:
            return
        if r.outcome == UNREACHED:  # the handler's runtime is down: wait before the next try
            self._faults.unreached(q.name, r.error or "")
            return
        if r.fault is None:
            self._faults.ok(q.name)
        self._last_failed = r.outcome != OK
        if self.metrics is not None:
            self._count(q, r)
        self.last_outcome = {
            "outcome": r.outcome,
            "size": r.size,
            "duration_ms": round(r.duration_s * 1000, 1),
            "error": r.error,
            "acked": r.acked,
            "retried": r.retried,
            "dead_lettered": r.dead_lettered,
            "undecodable": r.undecodable,
            "at_ms": self.clock(),
        }

    def _count(self, q: QueueRecord, r: Delivered) -> None:
        m = self.metrics
        assert m is not None
        labels = (q.account, q.name)
        m.acked.labels(*labels).inc(r.acked)
        m.retried.labels(*labels).inc(r.retried)
        if r.undecodable:
            m.undecodable.labels(*labels).inc(r.undecodable)
        m.batch_duration.labels(self.worker, q.name).observe(r.duration_s)
        if r.outcome != OK:
            m.handler_failures.labels(self.worker, q.name, r.outcome).inc()

    # ---------------------------------------------------------------- shutdown

    def stop_claiming(self) -> None:
        self._stopping = True
        self._changed.set()

    def reconfigure(self, worker: str, policy: ConsumerPolicy, kind: HandlerKind) -> None:
        """New settings or handler code: in-flight batches finish as they began; the next
        batch uses these."""
        self.worker = worker
        self.policy = policy
        self.kind = kind
        self._changed.set()

    def abort(self) -> None:
        self.stop_claiming()
        self._abort.set()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def inflight_tasks(self) -> set[asyncio.Task[None]]:
        return set(self._inflight)

    async def drain(self, timeout_s: float) -> None:
        """Let in-flight batches finish for up to ``timeout_s``, then hand the rest back
        without spending an attempt."""
        self.stop_claiming()
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=timeout_s)
        if self._inflight:
            self._abort.set()
            await asyncio.wait(set(self._inflight))


class _StoreLeases:
    """Push leases held in the store: a settle applies ``max_retries`` and the consumer's
    dead-letter queue, and is retried while the database is away."""

    def __init__(self, d: Dispatcher, q: QueueRecord, p: ConsumerPolicy) -> None:
        self.d = d
        self.q = q
        self.p = p

    async def settle(self, s: Settlement) -> Settled:
        d, q, p = self.d, self.q, self.p
        now = d.clock()
        spent = spend(s.retries, p.max_retries, now)
        acks = [m.seq for m in s.acks]
        gone = [m.seq for m in spent.dead] + [u.delivery.seq for u in s.undecodable]
        settled = await d._persist(
            lambda: d.store.settle(q, acks, spent.retries, gone, d._dead_letter(), now)
        )
        deadletters.tell(
            d.metrics, q, p.dead_letter_queue, (Dead(m.id, m.attempts, m.group) for m in spent.dead)
        )
        return settled

    async def give_back(self, deliveries: Sequence[Delivery]) -> int:
        d, q = self.d, self.q
        seqs = [m.seq for m in deliveries]
        return await d._persist(lambda: d.store.release(q, seqs, d.clock()))


def _drop(f: asyncio.Future[Any]) -> None:
    """Let go of a future that may never be awaited, without a "never retrieved" warning."""
    if f.cancel():
        return
    if not f.cancelled():
        f.exception()
