"""FIFO queues on SQLite's log: an acked message's row is dead until the queue's cut passes
it, and nothing dead is ever seen, counted or left behind for good."""

from __future__ import annotations

import sqlite3

import pytest

from ocd.store import DEDUP_WINDOW_MS, Claim, DeadLetter, LeaseKind, Retry, SqliteStore
from ocd.store.sqlite import fifo
from tests.store.conftest import T0
from tests.store.test_fifo import fifo_queue, fmsg, names

NO_DLQ = DeadLetter(None)
LEASE = 60_000

pytestmark = pytest.mark.timeout(60)


def rows(tmp_path, queue_key):
    con = sqlite3.connect(tmp_path / "scheduler.sqlite")
    try:
        (n,) = con.execute("SELECT count(*) FROM messages WHERE queue = ?", (queue_key,)).fetchone()
        return n
    finally:
        con.close()


async def drain(store, q, now=T0, limit=100):
    got = []
    while True:
        d = (await store.claim(q, Claim(limit, now, now + LEASE, 9, NO_DLQ))).deliveries
        if not d:
            return got
        got += d
        await store.settle(q, [x.seq for x in d], [], [], NO_DLQ, now)


async def test_acked_rows_are_cut_once_no_group_needs_them(tmp_path):
    store = SqliteStore(tmp_path)
    await store.open(T0)
    try:
        q = await fifo_queue(store)
        # interleaved groups: a group's batch is scattered over the band
        await store.enqueue(q, [fmsg(g, i) for i in range(20) for g in "abcde"])
        a = (await store.claim(q, Claim(20, T0, T0 + LEASE, 9, NO_DLQ))).deliveries
        assert names(a) == [f"a-{i}" for i in range(20)]
        await store.settle(q, [x.seq for x in a], [], [], NO_DLQ, T0)
        # a's rows are dead, but b's head (sent second) holds the cut just past a-0
        assert rows(tmp_path, q.key) == 99
        assert (await store.backlog(q)).count == 80
        rest = await drain(store, q)
        assert len(rest) == 80
        assert rows(tmp_path, q.key) == 0
        assert (await store.backlog(q)).count == 0
    finally:
        await store.close()


async def test_a_reopened_store_counts_live_messages_not_dead_rows(tmp_path):
    store = SqliteStore(tmp_path)
    await store.open(T0)
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg(g, i) for i in range(10) for g in "ab"])
    pull = Claim(10, T0, T0 + LEASE, 9, NO_DLQ, LeaseKind.PULL)  # a pull lease outlives ocd
    a = (await store.claim(q, pull)).deliveries
    await store.settle(q, [x.seq for x in a[1:]], [], [], NO_DLQ, T0)  # a-0 stays in flight
    await store.close()
    assert rows(tmp_path, q.key) == 20  # a-0 holds the cut: every row is still there

    again = SqliteStore(tmp_path)
    await again.open(T0)
    try:
        q = again.queue("orders.fifo")
        assert q is not None
        assert (await again.backlog(q)).count == 11
        # the dead rows are neither browsed nor delivered again
        listed = await again.peek(q, T0, 100)
        assert names(listed) == [f"b-{i}" for i in range(10)]
        got = await drain(again, q, now=T0 + LEASE)
        assert sorted(names(got)) == ["a-0"] + [f"b-{i}" for i in range(10)]
        assert rows(tmp_path, q.key) == 0
    finally:
        await again.close()


async def flow_past_a_stuck_group(tmp_path) -> tuple[int, list]:
    """A group whose head waits ten hours to be retried, while 160 messages of another
    group flow past it: the rows left, and the stuck message once it is due."""
    store = SqliteStore(tmp_path)
    await store.open(T0)
    try:
        q = await fifo_queue(store)
        await store.enqueue(q, [fmsg("stuck", 0)])
        [head] = (await store.claim(q, Claim(10, T0, T0 + LEASE, 9, NO_DLQ))).deliveries
        later = T0 + 10 * 3_600_000
        await store.settle(q, [], [Retry(head.seq, later)], [], NO_DLQ, T0)
        for round_ in range(4):
            await store.enqueue(q, [fmsg("flow", round_ * 40 + i) for i in range(40)])
            flowed = await drain(store, q, limit=40)
            assert names(flowed) == [f"flow-{round_ * 40 + i}" for i in range(40)]
            await store.expire(T0)  # the retention sweep, which compacts: nothing expires
        left = rows(tmp_path, q.key)
        due = (await store.claim(q, Claim(10, later, later + LEASE, 9, NO_DLQ))).deliveries
        assert (await store.backlog(q)).count == 1
        return left, due
    finally:
        await store.close()


async def test_a_group_stuck_at_the_cut_is_moved_behind_the_rest(tmp_path, monkeypatch):
    # without compaction, every dead row behind the stuck head stays
    monkeypatch.setattr(fifo, "COMPACT_AFTER", 1_000_000)
    left, due = await flow_past_a_stuck_group(tmp_path / "kept")
    assert left == 161
    monkeypatch.setattr(fifo, "COMPACT_AFTER", 50)
    left, due = await flow_past_a_stuck_group(tmp_path / "moved")
    assert left < 100
    # the moved message is the same message, its attempt and order kept
    assert names(due) == ["stuck-0"] and due[0].attempts == 2


def dedup_ids(tmp_path):
    con = sqlite3.connect(tmp_path / "scheduler.sqlite")
    try:
        return [d for (d,) in con.execute("SELECT dedup FROM fifo_dedup ORDER BY dedup")]
    finally:
        con.close()


async def test_expired_dedup_ids_are_forgotten_behind_one_still_in_its_window(tmp_path):
    """Ids are pruned from the front of the table in the order they were stored; one stored
    again over its expired row keeps its place there and must not hold back the ones whose
    windows closed behind it."""
    store = SqliteStore(tmp_path)
    await store.open(T0)
    try:
        q = await fifo_queue(store)
        await store.enqueue_fifo(q, [fmsg("a", 0, dedup="x")])
        later = T0 + 1000
        await store.enqueue_fifo(q, [fmsg("a", i, at=later, dedup=f"y{i}") for i in range(1, 6)])
        # x's window closed: stored again, it now names a new message until T0 + 2 windows
        _, again = await store.enqueue_fifo(q, [fmsg("b", 0, at=T0 + DEDUP_WINDOW_MS, dedup="x")])
        assert not again[0].duplicate
        await store.expire(later + DEDUP_WINDOW_MS)
        assert dedup_ids(tmp_path) == ["x"]
        at = later + DEDUP_WINDOW_MS
        _, dup = await store.enqueue_fifo(q, [fmsg("c", 0, at=at, dedup="x")])
        assert dup[0].duplicate and dup[0].id == again[0].id
        await store.expire(T0 + 2 * DEDUP_WINDOW_MS)
        assert dedup_ids(tmp_path) == []
    finally:
        await store.close()


def test_a_claim_reads_runs_only_until_its_batch_is_full_and_never_out_of_order():
    """``fifo._choose`` over ``group_runs``' rows (group index, seq, visible, place,
    attempts, first receive): it stops at the batch's last row, so the groups it never
    reached are neither read nor judged; an empty or hidden head marks its group stale;
    rows out of order give None, and the claim reads them all and sorts them instead."""
    now = 1_000
    rows = [
        (0, 10, 0, 1, 0, None), (0, 11, 0, 2, 2, 500), (0, 12, 5_000, 3, 0, None),
        (2, 30, 0, 1, 0, None), (2, 31, 0, 2, 0, None),
        (3, 40, 0, 1, 0, None),
    ]  # fmt: skip
    read: list[tuple] = []

    def reading(rs):
        for r in rs:
            read.append(r)
            yield r

    groups = ["a", "b", "c", "d", "e"]
    picked, leased, taken, stale = fifo._choose(reading(rows), groups, 3, now)
    assert picked == [10, 11, 30]  # a's run stops at its hidden third; b had nothing ready
    assert leased == {10: (1, now), 11: (3, 500), 30: (1, now)}
    assert list(taken) == ["a", "c"] and taken["a"].n == 2 and taken["c"].n == 1
    assert stale == ["b"]  # d and e were never reached: not judged
    assert len(read) == 4  # nothing past the batch's last row was read
    picked, _, _, stale = fifo._choose(iter(rows), groups, 100, now)
    assert picked == [10, 11, 30, 31, 40] and stale == ["b", "e"]
    assert fifo._choose(iter([rows[3], rows[0]]), groups, 100, now) is None
    assert fifo._choose(iter([rows[1], rows[0]]), groups, 100, now) is None
