"""A queue's counts, derived once for every surface: never negative, and they add up."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ocd.counts import QueueCounts, queue_counts
from ocd.store import NotReady


def test_the_counts_of_a_queue():
    assert queue_counts(10, NotReady(not_ready=4, leased=3)) == QueueCounts(10, 6, 1, 3)
    assert queue_counts(5, None) == QueueCounts(5, 5, 0, 0)


def test_reads_of_different_moments_are_clamped_not_negative():
    # the backlog read after two leased messages were acked: not 2 in flight of 1
    assert queue_counts(1, NotReady(not_ready=2, leased=2)) == QueueCounts(1, 0, 0, 1)
    assert queue_counts(0, NotReady(not_ready=3, leased=1)) == QueueCounts(0, 0, 0, 0)


@given(st.integers(-5, 50), st.integers(-5, 50), st.integers(-5, 50))
def test_they_always_add_up(backlog: int, not_ready: int, leased: int) -> None:
    c = queue_counts(backlog, NotReady(not_ready, leased))
    assert min(c) >= 0
    assert c.ready + c.delayed + c.in_flight == c.backlog == max(backlog, 0)
