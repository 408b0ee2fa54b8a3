"""One delivery pipeline for every kind of consumer.

A claimed batch goes through the same steps whoever runs the handler and wherever its
leases live::

    claim (the caller's) -> decode, per message -> invoke -> decide (pure) -> settle -> log

Each consumer kind supplies two things: its ``Invoke`` (in-process Python, workerd through
its bridge, ...) and its ``Leases`` (the store for push consumers; the REST pull API for
``ocd consume``). The rules live here, once:

- A body that cannot be decoded is that message's failure alone: it is dead-lettered at
  once (event ``message_undecodable``) and the rest of the batch is delivered. On a FIFO
  queue its group moves on past it, as past any dead-lettered head.
- A failure of ocd's own between claim and settle is a failed delivery: every message of the
  batch is retried with the consumer's retry delay, its attempt stays spent, and after
  ``max_retries + 1`` it dead-letters like any other (``Delivered.fault`` lets the caller
  back off).
- Only a shutdown (``aborted``) or a handler runtime that was never reached
  (``unreached``: workerd down) hands a batch back without spending an attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ocd import codec
from ocd.deadletters import where
from ocd.decide import decide, hold_back
from ocd.store import Delivery, Settled
from runtime import BatchMarks, Message, MessageBatch

log = logging.getLogger(__name__)

OK = "ok"
ABORTED = "aborted"  # shutdown: handed back, attempts given back
UNREACHED = "unreached"  # the handler's runtime (workerd) was not reached: handed back too
INTERNAL = "internalError"  # ocd's own failure between claim and settle


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an invoke came to, in workerd's names (``ok``, ``exception``,
    ``exceededWallTime``, ``canceled``, ``aborted``), and the error, if any."""

    name: str
    error: str | None = None
    # messages the kind itself found undecodable (id, reason): dead-lettered as the
    # pipeline's own finds are
    undecodable: tuple[tuple[str, str], ...] = ()


OUTCOME_OK = Outcome(OK)


class Invoke(Protocol):
    """Runs the handler on a batch; the handler's marks are on ``batch``. ``deliveries``
    are the batch's messages as stored, in order.

    ``python_bodies``: whether the handler needs ``batch.messages`` (Python values decoded
    here). A kind that hands the stored bytes on (workerd) says False: then only the bodies
    it cannot check itself (``self_checked`` content types excepted) are decoded here, to
    find the undecodable ones, and it reports its own finds in ``Outcome.undecodable``."""

    python_bodies: bool
    self_checked: frozenset[str]

    async def __call__(self, batch: MessageBatch, deliveries: Sequence[Delivery]) -> Outcome: ...


@dataclass(frozen=True, slots=True)
class Undecodable:
    delivery: Delivery
    reason: str


@dataclass(frozen=True, slots=True)
class Settlement:
    """A batch's outcome, before the lease holder applies ``max_retries``."""

    acks: list[Delivery]
    retries: list[tuple[Delivery, int]]  # (message, delay in seconds)
    undecodable: list[Undecodable]  # dead-lettered at once


class Leases(Protocol):
    """Where a batch's leases live."""

    async def settle(self, settlement: Settlement) -> Settled:
        """Record the outcome; retries that were the last attempt dead-letter."""

    async def give_back(self, deliveries: Sequence[Delivery]) -> int:
        """Hand the messages back without spending their attempt (shutdown only)."""


@dataclass(frozen=True, slots=True)
class Route:
    """One consumer, as the pipeline needs it."""

    queue: str
    worker: str
    fifo: bool
    retry_delay_s: int
    dead_letter_queue: str | None
    account: str = "local"


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one batch came to."""

    outcome: str
    error: str | None
    size: int
    acked: int
    retried: int
    dead_lettered: int  # exhausted and undecodable together
    undecodable: int
    duration_s: float
    fault: BaseException | None = None  # ocd's own failure, for the caller's backoff


Backlog = Callable[[], Awaitable[dict[str, Any]]]
FAULT_REPORT_S = 60.0  # during a burst of ocd's own failures, one line per this long
RETRIED = "the batch is retried, its attempts spent"
UNRECORDED = "its outcome could not be recorded; its messages come back when their leases lapse"
HANDED_BACK = "the database failed the settle; its messages are handed back unspent"


async def deliver(
    route: Route,
    deliveries: Sequence[Delivery],
    invoke: Invoke,
    leases: Leases,
    backlog: Backlog,
    on_fault: Callable[[BaseException], None] | None = None,
) -> Delivered:
    """Run one claimed batch through the pipeline. ``on_fault`` hears of a failure of ocd's
    own before the batch is settled (so that a backoff is in place before its messages can
    be claimed again). Raises only if the outcome could not be recorded (the lease holder
    gone); the messages then come back when their leases lapse."""
    started = time.monotonic()
    fault: BaseException | None = None
    bad: list[Undecodable] = []
    try:
        marks = BatchMarks()
        if invoke.python_bodies:
            messages, bad = decode_all(deliveries, marks, route.fifo)
        else:
            messages, bad = [], check_all(deliveries, invoke.self_checked)
        for u in bad:
            _log_undecodable(route, u)
        outcome = OUTCOME_OK
        gone = {u.delivery.seq for u in bad}
        handed = [d for d in deliveries if d.seq not in gone] if gone else deliveries
        if handed:
            batch = MessageBatch(route.queue, messages, await backlog(), marks)
            outcome = await invoke(batch, handed)
        if outcome.undecodable:
            found = _found(handed, outcome.undecodable)
            for u in found:
                _log_undecodable(route, u)
            bad = [*bad, *found]
        if outcome.name in (ABORTED, UNREACHED):
            released = await asyncio.shield(leases.give_back(deliveries))
            _log_released(route, released, outcome)
            return Delivered(
                outcome.name, outcome.error, len(deliveries), 0, 0, 0, 0, _since(started)
            )
        settlement = plan(route, deliveries, marks, outcome.name == OK, bad)
    except Exception as e:  # ocd's own: a failed delivery, the attempt stays spent
        fault = e
        outcome = Outcome(INTERNAL, f"{type(e).__name__}: {e}"[:300])
        gone = {u.delivery.seq for u in bad}
        settlement = Settlement(
            [], [(d, route.retry_delay_s) for d in deliveries if d.seq not in gone], bad
        )
        if on_fault is not None:
            on_fault(e)
    settled = await asyncio.shield(leases.settle(settlement))
    delivered = Delivered(
        outcome.name,
        outcome.error,
        len(deliveries),
        settled.acked,
        settled.retried,
        settled.dead_lettered + settled.deleted,
        len(settlement.undecodable),
        _since(started),
        fault,
    )
    _log_batch(route, delivered, bool(settlement.retries))
    return delivered


def decode_all(
    deliveries: Sequence[Delivery], marks: BatchMarks, fifo: bool
) -> tuple[list[Message], list[Undecodable]]:
    """The runtime messages of a batch, and the deliveries whose body could not be decoded
    (any exception of the codec is that message's alone)."""
    messages: list[Message] = []
    bad: list[Undecodable] = []
    utc = dt.UTC
    stamp = dt.datetime.fromtimestamp
    # The messages of one send share their send time: one datetime (immutable) for a run
    # of them, not one each.
    sent_ms: int | None = None
    sent = dt.datetime.min
    for d in deliveries:
        try:
            body = codec.decode(d.body, d.content_type)
        except Exception as e:
            bad.append(Undecodable(d, f"{d.content_type} body: {type(e).__name__}: {e}"[:300]))
            continue
        if d.sent_ms != sent_ms:
            sent_ms = d.sent_ms
            sent = stamp(sent_ms / 1000, utc)
        if fifo:
            messages.append(
                Message(d.id, sent, body, d.attempts, marks, d.group, d.sequence, d.dedup)
            )
        else:
            messages.append(Message(d.id, sent, body, d.attempts, marks))
    return messages, bad


def check_all(deliveries: Sequence[Delivery], self_checked: frozenset[str]) -> list[Undecodable]:
    """``decode_all``'s finds without keeping the values, for a kind that hands the stored
    bytes on and checks the ``self_checked`` content types itself."""
    bad: list[Undecodable] = []
    for d in deliveries:
        if d.content_type in self_checked:
            continue
        try:
            codec.decode(d.body, d.content_type)
        except Exception as e:
            bad.append(Undecodable(d, f"{d.content_type} body: {type(e).__name__}: {e}"[:300]))
    return bad


def _found(handed: Sequence[Delivery], ids: tuple[tuple[str, str], ...]) -> list[Undecodable]:
    by_id = {d.id: d for d in handed}
    return [Undecodable(by_id[i], reason[:300]) for i, reason in ids if i in by_id]


def plan(
    route: Route,
    deliveries: Sequence[Delivery],
    marks: BatchMarks,
    handler_ok: bool,
    bad: list[Undecodable],
) -> Settlement:
    """Decide (``ocd.decide``) for the messages the handler saw; the undecodable ones are
    dead-lettered whatever it did."""
    gone = {u.delivery.seq for u in bad}
    seen = [d for d in deliveries if d.seq not in gone] if gone else list(deliveries)
    verdict = decide((d.id for d in seen), marks, handler_ok, route.retry_delay_s)
    if route.fifo:
        verdict, out_of_order = hold_back([(d.id, d.group) for d in seen], verdict, marks)
        if out_of_order:
            log.warning(
                "queue %s: %d message(s) acked out of order behind a retried message of "
                "their group; they stay acked",
                route.queue,
                len(out_of_order),
                extra={"event": "fifo_acked_out_of_order", "queue": route.queue},
            )
    by_id = {d.id: d for d in seen}
    return Settlement(
        [by_id[i] for i in verdict.acks],
        [(by_id[i], delay) for i, delay in verdict.retries.items()],
        bad,
    )


class Backoff:
    """0.1 s, doubling to 5 s, with jitter so that nodes do not retry in step."""

    def __init__(self, cap_s: float = 5.0) -> None:
        self._delay = 0.1
        self._cap_s = cap_s

    def next(self) -> float:
        delay = self._delay * random.uniform(0.5, 1.0)
        self._delay = min(self._delay * 2, self._cap_s)
        return delay

    def reset(self) -> None:
        self._delay = 0.1


class Faults:
    """Failures of ocd's own between claim and settle, for one consumer: after each, the
    next claim waits (0.1 s doubling to 30 s); the first of a burst is logged with its
    traceback, the rest as a count once a minute, and the end of the burst once."""

    def __init__(self) -> None:
        self._backoff = Backoff(cap_s=30.0)
        self.hold_until = 0.0  # time.monotonic() before which nothing is claimed
        self.count = 0  # failed batches in this burst
        self._unreported = 0
        self._reported_at = 0.0

    def failed(self, queue: str, error: BaseException, fate: str) -> None:
        """One failed batch; ``fate`` says in a few words what became of its messages."""
        now = time.monotonic()
        self.hold_until = now + self._backoff.next()
        self.count += 1
        extra = {"event": "delivery_fault", "queue": queue, "count": self.count}
        if self.count == 1:
            self._reported_at = now
            log.error(
                "queue %s: delivery failed inside ocd (%s); %s; backing off",
                queue,
                f"{type(error).__name__}: {error}",
                fate,
                exc_info=error,
                extra=extra,
            )
            return
        self._unreported += 1
        if now - self._reported_at >= FAULT_REPORT_S:
            log.error(
                "queue %s: %d more batch(es) failed inside ocd in the last %.0f s (last: %s: "
                "%s); still backing off",
                queue,
                self._unreported,
                now - self._reported_at,
                type(error).__name__,
                error,
                extra=extra,
            )
            self._reported_at = now
            self._unreported = 0

    def unreached(self, queue: str, error: str) -> None:
        """The handler's runtime was not reached: nothing was spent; wait before trying."""
        self.hold_until = time.monotonic() + self._backoff.next()
        if not self.count:
            log.warning(
                "queue %s: consumer not reached (%s); its batches wait, attempts unspent",
                queue,
                error,
                extra={"event": "consumer_unreached", "queue": queue},
            )
        self.count += 1

    def ok(self, queue: str) -> None:
        if self.count:
            log.info(
                "queue %s: delivery works again after %d failed batch(es)",
                queue,
                self.count,
                extra={"event": "delivery_recovered", "queue": queue, "count": self.count},
            )
        self.count = 0
        self._unreported = 0
        self.hold_until = 0.0
        self._backoff.reset()


def _since(started: float) -> float:
    return time.monotonic() - started


def _log_undecodable(route: Route, u: Undecodable) -> None:
    extra: dict[str, object] = {
        "event": "message_undecodable",
        "queue": route.queue,
        "id": u.delivery.id,
        "attempts": u.delivery.attempts,
        "reason": u.reason,
    }
    if route.dead_letter_queue:
        extra["dead_letter_queue"] = route.dead_letter_queue
    if u.delivery.group is not None:
        extra["group"] = u.delivery.group
    log.warning(
        "queue %s: message %s cannot be decoded (%s); %s",
        route.queue,
        u.delivery.id,
        u.reason,
        where(route.dead_letter_queue),
        extra=extra,
    )


def _log_released(route: Route, released: int, outcome: Outcome) -> None:
    why = "at shutdown" if outcome.name == ABORTED else f"({outcome.error})"
    log.info(
        "queue %s: returned %d unfinished message(s) %s, their attempt not spent",
        route.queue,
        released,
        why,
        extra={
            "event": "batch_released",
            "queue": route.queue,
            "batch_size": released,
            "outcome": outcome.name,
        },
    )


def _log_batch(route: Route, d: Delivered, retried: bool) -> None:
    duration_ms = round(d.duration_s * 1000, 1)
    extra: dict[str, object] = {}
    if d.error is not None:
        extra["error"] = d.error
    log.info(
        "queue %s: %d acked, %d retried, %d dead-lettered of %d (%s, %.1f ms)%s",
        route.queue,
        d.acked,
        d.retried,
        d.dead_lettered,
        d.size,
        d.outcome,
        duration_ms,
        f": {d.error}" if d.error else "",
        extra=extra
        | {
            "event": "batch_retried" if retried else "batch_acked",
            "worker": route.worker,
            "queue": route.queue,
            "batch_size": d.size,
            "acked": d.acked,
            "retried": d.retried,
            "dead_lettered": d.dead_lettered,
            "undecodable": d.undecodable,
            "outcome": d.outcome,
            "duration_ms": duration_ms,
        },
    )
