"""The pure rules: what happens to each message of a batch, and how long a retry waits.

Precedence is workerd's (reference 2.4): an explicit ``ack()`` wins even if the handler then
raised; then an explicit ``retry()``; then ``ackAll()``; then ``retryAll()``; then the
handler's own outcome (success acks, failure retries).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


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


def send_delay(message_delay: int | None, batch_delay: int | None, queue_delay: int) -> int:
    """Per-message delay, else the batch's, else the queue's ``delivery_delay``; an explicit 0
    overrides a non-zero default."""
    if message_delay is not None:
        return message_delay
    if batch_delay is not None:
        return batch_delay
    return queue_delay
