"""The store's rules above the backends (ocd.store.rules): where exhausted messages go, and
FIFO's hold-back on a settle."""

from __future__ import annotations

from ocd.store import DeadLetter, QueueRecord, QueueSettings, Retry
from ocd.store.rules import Destination, Failing, destination, group_heads, hold_back


def queue(key: int, name: str) -> QueueRecord:
    return QueueRecord(key, "local", name, f"{key:032x}", 0, 0, QueueSettings())


def test_exhausted_messages_go_to_a_known_dead_letter_queue_else_are_deleted():
    jobs, dlq, jobs_fifo, dlq_fifo = (
        queue(1, "jobs"),
        queue(2, "dlq"),
        queue(3, "jobs.fifo"),
        queue(4, "dlq.fifo"),
    )
    known = {1, 2, 3, 4}.__contains__
    assert destination(jobs, DeadLetter(None), known) is Destination.DELETE
    assert destination(jobs, DeadLetter(dlq), known) is Destination.MOVE
    assert destination(jobs, DeadLetter(dlq), {1}.__contains__) is Destination.DELETE  # deleted
    assert destination(jobs_fifo, DeadLetter(dlq_fifo), known) is Destination.MOVE_FIFO
    assert destination(jobs_fifo, DeadLetter(dlq), known) is Destination.MOVE
    assert destination(jobs, DeadLetter(dlq_fifo), known) is Destination.MOVE


def test_a_groups_first_failure_keeps_its_fate_and_its_lease_mates_behind_go_back():
    # group a: seq 10 (place 1) retried, seq 12 (place 3) dead; group b: seq 20 dead
    rows = [Failing(12, "a", 3, 7), Failing(10, "a", 1, 7), Failing(20, "b", 1, None)]
    heads = group_heads(rows)
    assert heads.first == {"a": rows[1], "b": rows[2]}
    assert heads.later == {12}
    retries, dead = [Retry(10, 5_000)], [12, 20]
    # behind a's head under lease 7: 11 (acked here), 12 (failing), 13 (implicitly acked)
    held = hold_back(retries, dead, heads, behind=[11, 12, 13], acks={11})
    assert held.retries == [Retry(10, 5_000)]
    assert held.dead == [20]
    assert held.back == [12, 13]  # 11 was acked explicitly: it stays acked
    assert held.groups == {"a", "b"}


def test_messages_without_a_group_are_never_held_back():
    heads = group_heads([Failing(5, None, None, 3)])
    assert heads.first == {} and heads.later == set()
    held = hold_back([Retry(5, 0)], [], heads, behind=[], acks=set())
    assert held.retries == [Retry(5, 0)] and held.back == []
