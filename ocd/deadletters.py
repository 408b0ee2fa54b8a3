"""What is told when a message runs out of attempts: one log line each (event
``message_dead_lettered``, or ``message_deleted`` without a dead-letter queue) and the
``ocd_messages_dead_lettered_total`` count, whoever held its lease: a push consumer, an HTTP
pull or an SQS receive. The decision itself is ``ocd.decide.spend``'s."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import NamedTuple

from ocd.metrics import Metrics
from ocd.store import QueueRecord

log = logging.getLogger(__name__)


class Dead(NamedTuple):
    id: str
    attempts: int
    group: str | None = None


def where(dead_letter_queue: str | None) -> str:
    if dead_letter_queue:
        return f"moved to dead-letter queue {dead_letter_queue}"
    return "deleted (no dead-letter queue)"


def tell(
    metrics: Metrics | None,
    queue: QueueRecord,
    dead_letter_queue: str | None,
    dead: Iterable[Dead],
) -> None:
    """Log and count the messages of ``queue`` that ran out of attempts."""
    n = 0
    for d in dead:
        n += 1
        log_dead(queue.name, dead_letter_queue, d.id, d.attempts, d.group)
    if n and metrics is not None:
        metrics.dead_lettered.labels(queue.account, queue.name).inc(n)


def log_dead(
    queue: str, dead_letter_queue: str | None, mid: str, attempts: int, group: str | None = None
) -> None:
    """The line for a message that ran out of attempts."""
    moved_on = f"; its group {group} moves on to its next message" if group else ""
    extra: dict[str, object] = {
        "event": "message_dead_lettered" if dead_letter_queue else "message_deleted",
        "queue": queue,
        "id": mid,
        "attempts": attempts,
    }
    if dead_letter_queue:
        extra["dead_letter_queue"] = dead_letter_queue
    if group is not None:
        extra["group"] = group
    log.warning(
        "queue %s: message %s %s after %d attempts%s",
        queue,
        mid,
        where(dead_letter_queue),
        attempts,
        moved_on,
        extra=extra,
    )
