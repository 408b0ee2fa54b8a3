"""Push delivery: one Dispatcher per consumer.

A batch goes out when ``max_batch_size`` messages are ready, or when the longest-waiting
ready message has waited ``max_batch_timeout``. The dispatcher sleeps on store commits and
on the next time something becomes due, never on a per-message timer.

One batch: claim (the attempt counts now) -> decode -> run the handler under its wall-clock
limit -> decide (pure, ``ocd.decide``) -> settle (shielded from cancellation) -> log.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ocd import codec
from ocd.clock import Clock, wall_ms
from ocd.decide import decide, exhausted, hold_back
from ocd.errors import StoreError, StoreFull, StoreUnavailable
from ocd.metrics import Metrics
from ocd.producer import metrics_dict
from ocd.store import Backlog, DeadLetter, Delivery, QueueRecord, Retry, Store
from runtime import BatchMarks, ExecutionContext, Message, MessageBatch

log = logging.getLogger(__name__)

AUTOSCALE_CAP = 10  # concurrent batches per consumer when max_concurrency is unset
LEASE_GRACE_MS = 60_000
IDLE_RECHECK_S = 30.0  # fallback re-check when nothing wakes us (clock jumps, missed notify)
RACE_RECHECK_S = 0.05  # re-check after another node claimed what we saw ready
CAPPED_RECHECK_S = 1.0  # re-check of a consumer whose max_concurrency other nodes fill
PERSIST_FOR_S = 300.0  # how long a batch's outcome is retried while the database is away

QueueCall = Callable[[MessageBatch, ExecutionContext], Awaitable[Any]]
T = TypeVar("T")


class _Backoff:
    """0.1 s, doubling to 5 s, with jitter so that nodes do not retry in step."""

    def __init__(self) -> None:
        self._delay = 0.1

    def next(self) -> float:
        delay = self._delay * random.uniform(0.5, 1.0)
        self._delay = min(self._delay * 2, 5.0)
        return delay

    def reset(self) -> None:
        self._delay = 0.1


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
        store: Store,
        worker: str,
        policy: ConsumerPolicy,
        call: QueueCall,
        clock: Clock = wall_ms,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.worker = worker
        self.policy = policy
        self.call = call
        self.clock = clock
        self._inflight: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()  # a batch finished, or we are stopping
        self._stopping = False
        self._abort = asyncio.Event()
        self._last_failed = False
        self.last_outcome: dict[str, Any] | None = None
        self._last_error: str | None = None  # the last failed batch's error class and message

    # ---------------------------------------------------------------- the loop

    async def run(self) -> None:
        """Dispatch until stopped. While the database is unavailable, dispatch pauses and
        tries again with backoff instead of ending (the daemon keeps serving)."""
        backoff = _Backoff()
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
        # the catalogue, or the database for a queue another node made a moment ago
        q = self.store.queue(p.queue, p.account) or await self.store.lookup(p.queue, p.account)
        if q is None:
            await self._sleep(None, IDLE_RECHECK_S)
            return
        woken = self.store.watch(q)
        if q.settings.delivery_paused:
            await self._sleep(woken, IDLE_RECHECK_S)
            return
        cap = p.max_concurrency or AUTOSCALE_CAP
        if len(self._inflight) >= cap:
            await self._sleep(None, IDLE_RECHECK_S)
            return
        now = self.clock()
        ready = await self.store.ready(q, now, p.max_batch_size)
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
            wait_s = IDLE_RECHECK_S if due is None else max(0.0, (due - now) / 1000)
            await self._sleep(woken, min(wait_s, IDLE_RECHECK_S))
            return
        if not await self._claim_and_start(q, now):
            # Another node took the batch, or (capped) holds every slot: their settles
            # wake us, but a node that dies wakes no one, so also look again soon.
            capped = p.max_concurrency is not None
            await self._sleep(woken, CAPPED_RECHECK_S if capped else RACE_RECHECK_S)

    async def _sleep(self, woken: asyncio.Event | None, timeout_s: float) -> None:
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
        claimed = await self.store.claim(
            q,
            p.max_batch_size,
            now,
            lease_until,
            p.max_retries + 1,
            self._dead_letter(),
            max_batches=p.max_concurrency,  # a limit for the whole deployment
        )
        for mid in claimed.exhausted:
            self._log_dead(q, mid, p.max_retries + 1)
        if claimed.exhausted and self.metrics is not None:
            self.metrics.dead_lettered.labels(q.account, q.name).inc(len(claimed.exhausted))
        if not claimed.deliveries:
            return bool(claimed.exhausted)
        task = asyncio.create_task(
            self._guarded(q, claimed.deliveries), name=f"ocd-batch-{self.worker}-{q.name}"
        )
        self._inflight.add(task)
        task.add_done_callback(self._finished)
        return True

    async def _persist(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run a settle or release, trying again while the database is unavailable: the
        handler's verdict is kept rather than left for the lease to lapse (which would
        deliver acked messages again)."""
        backoff = _Backoff()
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

    async def _guarded(self, q: QueueRecord, deliveries: list[Delivery]) -> None:
        """One batch; if it fails on the way (a bug, the database gone for longer than a
        settle is retried), its messages are handed back rather than left leased until the
        lease lapses. Only still-leased messages are touched, so this is safe whenever the
        failure came."""
        try:
            await self._batch(q, deliveries)
        except Exception:
            seqs = [d.seq for d in deliveries]
            with contextlib.suppress(StoreError):
                await asyncio.shield(
                    self._persist(lambda: self.store.release(q, seqs, self.clock()))
                )
            raise

    async def _batch(self, q: QueueRecord, deliveries: list[Delivery]) -> None:
        p = self.policy
        started = time.monotonic()
        marks = BatchMarks()
        if q.fifo:
            messages = [
                Message(
                    d.id,
                    dt.datetime.fromtimestamp(d.sent_ms / 1000, dt.UTC),
                    codec.decode(d.body, d.content_type),
                    d.attempts,
                    marks,
                    d.group,
                    d.sequence,
                    d.dedup,
                )
                for d in deliveries
            ]
        else:
            messages = [
                Message(
                    d.id,
                    dt.datetime.fromtimestamp(d.sent_ms / 1000, dt.UTC),
                    codec.decode(d.body, d.content_type),
                    d.attempts,
                    marks,
                )
                for d in deliveries
            ]
        try:
            backlog = await self.store.backlog(q)
        except StoreError:  # the batch's metadata is not worth holding its messages
            backlog = Backlog(self.store.backlog_count(q), 0, 0)
        metrics = metrics_dict(backlog)
        batch = MessageBatch(q.name, messages, metrics, marks)
        outcome = await self._invoke(batch, started)
        if outcome == "aborted":
            released = await asyncio.shield(
                self._persist(
                    lambda: self.store.release(q, [d.seq for d in deliveries], self.clock())
                )
            )
            log.info(
                "queue %s: returned %d unfinished message(s) at shutdown",
                q.name,
                released,
                extra={"event": "batch_released", "queue": q.name, "batch_size": released},
            )
            return
        ok = outcome == "ok"
        self._last_failed = not ok
        verdict = decide((d.id for d in deliveries), marks, ok, p.retry_delay_s)
        if q.fifo:
            verdict, out_of_order = hold_back([(d.id, d.group) for d in deliveries], verdict, marks)
            if out_of_order:
                log.warning(
                    "queue %s: %d message(s) acked out of order behind a retried message of "
                    "their group; they stay acked",
                    q.name,
                    len(out_of_order),
                    extra={"event": "fifo_acked_out_of_order", "queue": q.name},
                )
        by_id = {d.id: d for d in deliveries}
        now = self.clock()
        acks = [by_id[i].seq for i in verdict.acks]
        retries: list[Retry] = []
        dead: list[Delivery] = []
        for mid, delay_s in verdict.retries.items():
            d = by_id[mid]
            if exhausted(d.attempts, p.max_retries):
                dead.append(d)
            else:
                retries.append(Retry(d.seq, now + delay_s * 1000))
        seqs = [d.seq for d in dead]
        settled = await asyncio.shield(
            self._persist(
                lambda: self.store.settle(q, acks, retries, seqs, self._dead_letter(), now)
            )
        )
        for d in dead:
            self._log_dead(q, d.id, d.attempts, d.group)
        duration_s = time.monotonic() - started
        if self.metrics is not None:
            self._count(q, outcome, settled.acked, settled.retried, len(dead), duration_s)
        duration_ms = round(duration_s * 1000, 1)
        self.last_outcome = {
            "outcome": outcome,
            "size": len(deliveries),
            "duration_ms": duration_ms,
            "error": self._last_error if outcome != "ok" else None,
            "acked": settled.acked,
            "retried": settled.retried,
            "dead_lettered": len(dead),
            "at_ms": now,
        }
        log.info(
            "queue %s: %d acked, %d retried, %d dead-lettered of %d (%s, %.1f ms)",
            q.name,
            settled.acked,
            settled.retried,
            len(dead),
            len(deliveries),
            outcome,
            duration_ms,
            extra={
                "event": "batch_acked" if not verdict.retries else "batch_retried",
                "worker": self.worker,
                "queue": q.name,
                "batch_size": len(deliveries),
                "acked": settled.acked,
                "retried": settled.retried,
                "dead_lettered": len(dead),
                "outcome": outcome,
                "duration_ms": duration_ms,
            },
        )

    def _count(
        self, q: QueueRecord, outcome: str, acked: int, retried: int, dead: int, duration_s: float
    ) -> None:
        m = self.metrics
        assert m is not None
        labels = (q.account, q.name)
        m.acked.labels(*labels).inc(acked)
        m.retried.labels(*labels).inc(retried)
        m.dead_lettered.labels(*labels).inc(dead)
        m.batch_duration.labels(self.worker, q.name).observe(duration_s)
        if outcome != "ok":
            m.handler_failures.labels(self.worker, q.name, outcome).inc()

    async def _invoke(self, batch: MessageBatch, started: float) -> str:
        """Run the handler and its waitUntil tasks; the outcome name, workerd-style."""
        ctx = ExecutionContext()
        deadline = started + self.policy.handler_timeout_s
        handler = asyncio.ensure_future(self.call(batch, ctx))
        outcome = await self._await(handler, deadline)
        if outcome != "ok":
            self._cancel_all(ctx)
            return outcome
        seen = 0
        while seen < len(ctx.tasks):  # waitUntil tasks may add more
            task = ctx.tasks[seen]
            seen += 1
            outcome = await self._await(task, deadline)
            if outcome != "ok":
                self._cancel_all(ctx)
                return outcome
        return "ok"

    async def _await(self, fut: asyncio.Future[Any], deadline: float) -> str:
        abort = asyncio.ensure_future(self._abort.wait())
        try:
            done, _ = await asyncio.wait(
                {fut, abort},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            abort.cancel()
        if fut not in done:
            fut.cancel()
            with contextlib.suppress(BaseException):
                await fut
            if self._abort.is_set():
                return "aborted"
            log.error(
                "queue %s: handler of worker %s exceeded its %.0f s wall-clock limit",
                self.policy.queue,
                self.worker,
                self.policy.handler_timeout_s,
                extra={"event": "handler_timeout", "worker": self.worker},
            )
            self._last_error = f"exceeded its {self.policy.handler_timeout_s:.0f} s limit"
            return "exceededWallTime"
        if fut.cancelled():
            return "canceled"
        exc = fut.exception()
        if exc is not None:
            self._last_error = f"{type(exc).__name__}: {exc}"[:300]
            log.error(
                "queue %s: handler of worker %s raised",
                self.policy.queue,
                self.worker,
                exc_info=exc,
                extra={"event": "handler_failed", "worker": self.worker},
            )
            return "exception"
        return "ok"

    @staticmethod
    def _cancel_all(ctx: ExecutionContext) -> None:
        for t in ctx.tasks:
            t.cancel()

    def _log_dead(self, q: QueueRecord, mid: str, attempts: int, group: str | None = None) -> None:
        dlq = self.policy.dead_letter_queue
        where = f"moved to dead-letter queue {dlq}" if dlq else "deleted (no dead-letter queue)"
        moved_on = f"; its group {group} moves on to its next message" if group else ""
        extra: dict[str, object] = {
            "event": "message_dead_lettered" if dlq else "message_deleted",
            "queue": q.name,
            "id": mid,
            "attempts": attempts,
        }
        if dlq:
            extra["dead_letter_queue"] = dlq
        if group is not None:
            extra["group"] = group
        log.warning(
            "queue %s: message %s %s after %d attempts%s",
            q.name,
            mid,
            where,
            attempts,
            moved_on,
            extra=extra,
        )

    # ---------------------------------------------------------------- shutdown

    def stop_claiming(self) -> None:
        self._stopping = True
        self._changed.set()

    def reconfigure(self, worker: str, policy: ConsumerPolicy, call: QueueCall) -> None:
        """New settings or handler code: in-flight batches finish as they began; the next
        batch uses these."""
        self.worker = worker
        self.policy = policy
        self.call = call
        self._changed.set()

    def abort(self) -> None:
        self.stop_claiming()
        self._abort.set()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    async def drain(self, timeout_s: float) -> None:
        """Let in-flight batches finish for up to ``timeout_s``, then hand the rest back
        without spending an attempt."""
        self.stop_claiming()
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=timeout_s)
        if self._inflight:
            self._abort.set()
            await asyncio.wait(set(self._inflight))
