"""The pure rules: what happens to each message of a batch, and how long a retry waits.

Precedence is workerd's (reference 2.4): an explicit ``ack()`` wins even if the handler then
raised; then an explicit ``retry()``; then ``ackAll()``; then ``retryAll()``; then the
handler's own outcome (success acks, failure retries).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ocd.store.values import Retry


class Marks(Protocol):
    ack_all: bool
    retry_all: bool
    retry_all_delay: int | None
    acks: set[str]
    retries: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class Verdict:
    acks: list[str]
    retries: dict[str, int]  # message id -> delay in seconds


def decide(ids: Iterable[str], marks: Marks, handler_ok: bool, retry_delay_s: int) -> Verdict:
    """Acks and retries (with their delays) for the messages ``ids`` of one delivery."""
    acks: list[str] = []
    retries: dict[str, int] = {}
    batch_delay = marks.retry_all_delay if marks.retry_all_delay is not None else retry_delay_s
    for mid in ids:
        if mid in marks.acks:
            acks.append(mid)
        elif mid in marks.retries:
            delay = marks.retries[mid]
            retries[mid] = batch_delay if delay is None else delay
        elif marks.ack_all:
            acks.append(mid)
        elif marks.retry_all:
            retries[mid] = batch_delay
        elif handler_ok:
            acks.append(mid)
        else:
            retries[mid] = retry_delay_s
    return Verdict(acks, retries)


def hold_back(
    grouped: Sequence[tuple[str, str | None]], verdict: Verdict, marks: Marks
) -> tuple[Verdict, list[str]]:
    """The FIFO rule on top of ``decide``: ``grouped`` is the batch's (message id, group) in
    delivery order. Behind a retried message, the later messages of its group that were
    acked only implicitly (the handler returned) are not acked, so that the store hands
    them back with it instead of letting them overtake it. Explicit acks (``ack()``,
    ``ackAll()``) stand; returns them too, as acked out of order."""
    failed: set[str] = set()
    held: set[str] = set()
    out_of_order: list[str] = []
    for mid, group in grouped:
        if group is None:
            continue
        if mid in verdict.retries:
            failed.add(group)
        elif group in failed:
            if marks.ack_all or mid in marks.acks:
                out_of_order.append(mid)
            else:
                held.add(mid)
    if not held:
        return verdict, out_of_order
    return Verdict([m for m in verdict.acks if m not in held], verdict.retries), out_of_order


def exhausted(attempts: int, max_retries: int) -> bool:
    """A retried message that has had ``max_retries + 1`` deliveries is done for."""
    return attempts >= max_retries + 1


class Held(Protocol):
    """A message under a lease, as its holder knows it: a push delivery or a pull's
    checked lease id."""

    @property
    def seq(self) -> int: ...
    @property
    def attempts(self) -> int: ...


H = TypeVar("H", bound=Held)


@dataclass(frozen=True, slots=True)
class Spent(Generic[H]):
    retries: list[Retry]  # made ready again at their time
    dead: list[H]  # out of attempts: to the dead-letter queue, or deleted


def spend(retries: Iterable[tuple[H, int]], max_retries: int, now_ms: int) -> Spent[H]:
    """The one lease-holder rule, for push and pull alike: each retried ``(message, delay
    in seconds)`` comes back ``delay`` from ``now_ms``, unless it has had its
    ``max_retries + 1`` deliveries; then it is dead."""
    again: list[Retry] = []
    dead: list[H] = []
    for m, delay_s in retries:
        if exhausted(m.attempts, max_retries):
            dead.append(m)
        else:
            again.append(Retry(m.seq, now_ms + delay_s * 1000))
    return Spent(again, dead)


def send_delay(message_delay: int | None, batch_delay: int | None, queue_delay: int) -> int:
    """Per-message delay, else the batch's, else the queue's ``delivery_delay``; an explicit 0
    overrides a non-zero default."""
    if message_delay is not None:
        return message_delay
    if batch_delay is not None:
        return batch_delay
    return queue_delay
