"""A queue's counts, derived once for every surface (``ocd status`` and ``/__ocd/status``,
the Prometheus gauges, the dashboard's rows, the REST metrics, SQS's approximate numbers).

The backlog (every unacknowledged message) and the not-ready/leased counts come from two
reads that may see different moments; the counts are clamped so that none is negative and
ready + delayed + in flight is the backlog, whichever surface asks.
"""

from __future__ import annotations

from typing import NamedTuple

from ocd.store import NotReady


class QueueCounts(NamedTuple):
    backlog: int  # unacknowledged: ready, delayed and in flight
    ready: int
    delayed: int  # not yet visible (a send or retry delay), not leased
    in_flight: int  # leased to a consumer


def queue_counts(backlog: int, stats: NotReady | tuple[int, int] | None) -> QueueCounts:
    """The counts of a queue from its backlog and its ``Store.queue_stats`` entry."""
    not_ready, leased = stats if stats is not None else (0, 0)
    backlog = max(backlog, 0)
    in_flight = min(max(leased, 0), backlog)
    delayed = min(max(not_ready - leased, 0), backlog - in_flight)
    return QueueCounts(backlog, backlog - in_flight - delayed, delayed, in_flight)
