"""The store conformance suite: every backend passes it (``store`` is parametrised over
every backend in ``conftest.py``). It knows the contract in ``ocd.store.base`` only.

Real SQLite files in a temp dir, a real PostgreSQL database of the test's own; time comes
from integers passed in.
"""

from __future__ import annotations

import asyncio

import pytest

from ocd.errors import QueueNotFound, StoreConflict
from ocd.store import (
    Claim,
    DeadLetter,
    Expired,
    LeaseKind,
    NewMessage,
    PullConsumer,
    QueueSettings,
    Retry,
)
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)


def msgs(n, at=T0, delay_ms=0, body=b'"x"', prefix="m"):
    return [NewMessage(f"{prefix}{i:031d}", "json", body, at, at + delay_ms) for i in range(n)]


async def test_enqueue_counts_backlog_with_oldest(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    b = await store.enqueue(q, msgs(3, body=b"12345"))
    assert (b.count, b.bytes, b.oldest_ms) == (3, 15, T0)
    b = await store.enqueue(q, msgs(1, at=T0 + 10, prefix="n"))
    assert (b.count, b.oldest_ms) == (4, T0)


async def test_claim_hides_messages_until_settled_and_counts_attempt(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(5))
    c = await store.claim(q, Claim(3, T0, T0 + 60_000, 4, NO_DLQ))
    assert len(c.deliveries) == 3
    assert all(d.attempts == 1 for d in c.deliveries)
    c2 = await store.claim(q, Claim(10, T0, T0 + 60_000, 4, NO_DLQ))
    assert len(c2.deliveries) == 2  # disjoint
    assert not {d.id for d in c.deliveries} & {d.id for d in c2.deliveries}
    r = await store.ready(q, T0, 10)
    assert r.count == 0 and r.next_visible_ms == T0 + 60_000


async def test_settle_acks_retries_and_dead_letters(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(q, msgs(3))
    d = (await store.claim(q, Claim(3, T0, T0 + 1000, 4, NO_DLQ))).deliveries
    s = await store.settle(
        q, [d[0].seq], [Retry(d[1].seq, T0 + 5000)], [d[2].seq], DeadLetter(dlq), T0
    )
    assert (s.acked, s.retried, s.dead_lettered, s.deleted) == (1, 1, 1, 0)
    assert (await store.backlog(q)).count == 1
    moved = (await store.claim(dlq, Claim(10, T0, T0 + 1000, 4, NO_DLQ))).deliveries
    assert [m.id for m in moved] == [d[2].id]
    assert moved[0].attempts == 1 and moved[0].sent_ms == T0  # same id and timestamp
    assert (await store.ready(q, T0 + 4999, 10)).count == 0
    again = (await store.claim(q, Claim(10, T0 + 5000, T0 + 9000, 4, NO_DLQ))).deliveries
    assert [m.attempts for m in again] == [2]


async def test_dead_letter_without_dlq_deletes(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(1))
    d = (await store.claim(q, Claim(1, T0, T0 + 1000, 1, NO_DLQ))).deliveries
    s = await store.settle(q, [], [], [d[0].seq], NO_DLQ, T0)
    assert s.deleted == 1
    assert (await store.backlog(q)).count == 0


async def test_claim_dead_letters_messages_whose_attempts_are_spent(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("dlq", "local", None, T0)
    await store.enqueue(q, msgs(1))
    # Two lapsed leases with max_attempts=2: the third claim finds it spent.
    for i in range(2):
        c = await store.claim(q, Claim(1, T0 + i * 10, T0 + i * 10 + 5, 2, DeadLetter(dlq)))
        assert c.deliveries[0].attempts == i + 1
    c = await store.claim(q, Claim(1, T0 + 100, T0 + 200, 2, DeadLetter(dlq)))
    assert c.deliveries == [] and len(c.exhausted) == 1
    assert (await store.backlog(dlq)).count == 1


async def test_ready_reports_first_ready_and_next_visible(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2, delay_ms=0))
    await store.enqueue(q, msgs(1, delay_ms=30_000, prefix="d"))
    r = await store.ready(q, T0 + 10, 10)
    assert (r.count, r.first_ready_ms, r.next_visible_ms) == (2, T0, T0 + 30_000)
    assert (await store.ready(q, T0 + 10, 1)).count == 1  # capped at the limit


async def test_release_returns_messages_without_spending_an_attempt(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2))
    d = (await store.claim(q, Claim(2, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    assert await store.release(q, [x.seq for x in d], T0 + 1) == 2
    again = (await store.claim(q, Claim(2, T0 + 1, T0 + 60_000, 4, NO_DLQ))).deliveries
    assert [x.attempts for x in again] == [1, 1]


async def test_expire_deletes_past_retention_only(store):
    q = await store.ensure_queue("jobs", "local", QueueSettings(message_retention_period_s=60), T0)
    await store.enqueue(q, msgs(3, at=T0))
    await store.enqueue(q, msgs(2, at=T0 + 30_000, prefix="n"))
    assert await store.expire(T0 + 59_999) == []
    assert await store.expire(T0 + 60_001) == [Expired("local", "jobs", 3)]
    b = await store.backlog(q)
    assert (b.count, b.oldest_ms) == (2, T0 + 30_000)


async def test_a_sweep_with_nothing_to_expire_writes_nothing(store):
    # An idle daemon sweeps every few seconds: a thousand idle queues were a thousand writes.
    settings = QueueSettings(message_retention_period_s=60)
    queues = [await store.ensure_queue(f"q{i}", "local", settings, T0) for i in range(50)]
    await store.enqueue(queues[7], msgs(3, at=T0 + 30_000))
    before = store.commits
    assert await store.expire(T0 + 60_001) == []
    assert store.commits == before
    assert (await store.backlog(queues[7])).count == 3
    assert await store.expire(T0 + 90_001) == [Expired("local", "q7", 3)]  # found when due
    assert (await store.backlog(queues[7])).count == 0


async def test_purge_and_delete_queue(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(4))
    assert await store.purge(q, T0) == 4
    assert (await store.backlog(q)).count == 0
    await store.delete_queue(q)
    assert store.queue("jobs") is None


async def test_queues_are_per_account(store):
    a = await store.ensure_queue("jobs", "acme", None, T0)
    b = await store.ensure_queue("jobs", "local", None, T0)
    assert a.key != b.key and a.queue_id != b.queue_id
    assert len(a.queue_id) == 32 and int(a.queue_id, 16) >= 0
    assert store.queue("jobs", "acme") == a


async def test_watch_fires_on_commit_that_adds_messages(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    ev = store.watch(q)
    assert not ev.is_set()
    await store.enqueue(q, msgs(1))
    await asyncio.wait_for(ev.wait(), 5)


async def test_concurrent_enqueues_are_group_committed(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    before = store.commits
    await asyncio.gather(*(store.enqueue(q, msgs(1, prefix=f"p{i}")) for i in range(200)))
    assert (await store.backlog(q)).count == 200
    assert store.commits - before < 200  # many sends share a transaction


async def test_a_group_larger_than_one_insert_keeps_every_message_in_send_order(store):
    # 100 + 37 sends of one each: several INSERT statements of 32 rows and a shorter last one
    q = await store.ensure_queue("jobs", "local", None, T0)
    batch = msgs(100, prefix="b")
    singles = [msgs(1, prefix=f"s{i:03d}") for i in range(37)]
    await asyncio.gather(store.enqueue(q, batch), *(store.enqueue(q, m) for m in singles))
    claimed = (await store.claim(q, Claim(200, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    sent = [m.id for m in batch] + [m[0].id for m in singles]
    assert sorted(d.id for d in claimed) == sorted(sent)
    # seq order is send order: the batch's messages stay in their order within it
    by_seq = [d.id for d in sorted(claimed, key=lambda d: d.seq)]
    assert [i for i in by_seq if i.startswith("b")] == [m.id for m in batch]
    assert (await store.backlog(q)).bytes == 137 * len(b'"x"')


async def test_peek_does_not_lease_and_delete_messages_removes_by_seq(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(3))
    peeked = await store.peek(q, T0, 2)
    assert len(peeked) == 2 and all(p.attempts == 0 for p in peeked)
    assert (await store.ready(q, T0, 10)).count == 3
    assert await store.delete_messages(q, [peeked[0].seq]) == 1
    assert (await store.backlog(q)).count == 2


async def test_a_seq_moved_to_the_dlq_is_out_of_reach_of_the_old_queue(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("dlq", "local", None, T0)
    await store.enqueue(q, msgs(1))
    d = (await store.claim(q, Claim(1, T0, T0 + 10, 4, NO_DLQ))).deliveries[0]
    await store.settle(q, [], [], [d.seq], DeadLetter(dlq), T0)
    s = await store.settle(q, [d.seq], [], [], NO_DLQ, T0)  # a stale ack on the old queue
    assert s.acked == 0
    assert (await store.backlog(dlq)).count == 1


async def test_purge_records_when_it_ran(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2))
    assert await store.purge(q, T0 + 9) == 2
    assert store.queue("jobs").purged_ms == T0 + 9


async def test_concurrent_creates_of_one_name_make_one_queue(store):
    made = await asyncio.gather(*(store.ensure_queue("same", "local", None, T0) for _ in range(5)))
    assert len({q.key for q in made}) == 1
    assert [q.name for q in store.queues()].count("same") == 1


async def test_a_send_whose_caller_is_cancelled_is_still_committed(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    task = asyncio.create_task(store.enqueue(q, msgs(1)))
    await asyncio.sleep(0)  # let it hand the operation to the writer
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.enqueue(q, msgs(1, prefix="n"))  # committed after the cancelled one
    assert (await store.backlog(q)).count == 2


async def test_state_survives_reopen_and_push_leases_come_back(open_store):
    s = await open_store()
    q = await s.ensure_queue("jobs", "local", QueueSettings(delivery_delay_s=7), T0)
    await s.enqueue(q, msgs(3))
    await s.claim(q, Claim(2, T0, T0 + 900_000, 4, NO_DLQ))
    await s.close()
    s2 = await open_store(T0 + 5)
    q2 = s2.queue("jobs")
    assert q2 is not None and q2.settings.delivery_delay_s == 7 and q2.queue_id == q.queue_id
    assert (await s2.backlog(q2)).count == 3
    assert (await s2.ready(q2, T0 + 5, 10)).count == 3  # push leases returned at once
    d = (await s2.claim(q2, Claim(10, T0 + 5, T0 + 100, 4, NO_DLQ))).deliveries
    assert sorted(x.attempts for x in d) == [1, 2, 2]  # the held lease's attempt stays spent


async def test_pull_leases_survive_a_restart_until_they_lapse(open_store):
    s = await open_store()
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.enqueue(q, msgs(1))
    await s.claim(q, Claim(1, T0, T0 + 30_000, 4, NO_DLQ, LeaseKind.PULL))
    await s.close()
    s2 = await open_store(T0 + 5)
    q2 = s2.queue("jobs")
    assert (await s2.ready(q2, T0 + 5, 10)).count == 0
    assert (await s2.ready(q2, T0 + 30_000, 10)).count == 1


async def test_pull_consumer_is_stored_updated_and_survives_reopen(open_store):
    s = await open_store()
    q = await s.ensure_queue("jobs", "local", None, T0)
    c = await s.put_pull_consumer(q, PullConsumer(q.key, "a" * 32, T0, None, batch_size=7))
    c2 = await s.put_pull_consumer(q, PullConsumer(q.key, "b" * 32, T0 + 5, "dlq", batch_size=9))
    assert c2.consumer_id == c.consumer_id and c2.created_ms == T0  # an update, not a new one
    assert (c2.batch_size, c2.dead_letter_queue) == (9, "dlq")
    secret = await s.secret("lease")
    await s.close()
    s2 = await open_store()
    q2 = s2.queue("jobs")
    assert s2.pull_consumer(q2) == c2
    assert await s2.secret("lease") == secret and len(secret) == 32
    assert await s2.delete_pull_consumer(q2) is True
    assert s2.pull_consumer(q2) is None


async def test_create_queue_refuses_a_taken_name_with_a_conflict(store):
    await store.create_queue("jobs", "local", QueueSettings(), T0)
    with pytest.raises(StoreConflict):
        await store.create_queue("jobs", "local", QueueSettings(), T0)
    other = await store.create_queue("jobs", "acme", QueueSettings(), T0)  # another account
    assert other.account == "acme"
    assert [q.name for q in store.queues()].count("jobs") == 2


async def test_concurrent_creates_of_one_name_make_one_queue_and_conflicts(store):
    results = await asyncio.gather(
        *(store.create_queue("same", "local", QueueSettings(), T0) for _ in range(5)),
        return_exceptions=True,
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    assert len(made) == 1
    assert all(isinstance(r, StoreConflict) for r in results if isinstance(r, BaseException))


async def test_renaming_onto_a_taken_name_is_a_conflict_and_changes_nothing(store):
    a = await store.create_queue("a", "local", QueueSettings(), T0)
    await store.create_queue("b", "local", QueueSettings(), T0)
    with pytest.raises(StoreConflict):
        await store.update_queue(a, a.settings, T0 + 1, "b")
    assert store.queue("a") is not None and store.queue("a").key == a.key
    renamed = await store.update_queue(a, QueueSettings(delivery_paused=True), T0 + 2, "c")
    assert store.queue("c") == renamed and store.queue("a") is None
    assert renamed.queue_id == a.queue_id and renamed.settings.delivery_paused


async def test_a_send_to_a_deleted_queue_is_queue_not_found(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.delete_queue(q)
    with pytest.raises(QueueNotFound):
        await store.enqueue(q, msgs(1))
    with pytest.raises(QueueNotFound):
        await store.update_queue(q, QueueSettings(), T0)


async def test_capped_claims_stop_at_max_batches_in_flight(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(6))
    first = await store.claim(q, Claim(2, T0, T0 + 10_000, 4, NO_DLQ, max_batches=2))
    second = await store.claim(q, Claim(2, T0, T0 + 10_000, 4, NO_DLQ, max_batches=2))
    third = await store.claim(q, Claim(2, T0, T0 + 10_000, 4, NO_DLQ, max_batches=2))
    assert [len(c.deliveries) for c in (first, second, third)] == [2, 2, 0]
    await store.settle(q, [d.seq for d in first.deliveries], [], [], NO_DLQ, T0)
    assert len(
        (await store.claim(q, Claim(2, T0, T0 + 10_000, 4, NO_DLQ, max_batches=2))).deliveries
    )
    # a lapsed lease is not in flight any more
    later = await store.claim(q, Claim(2, T0 + 10_001, T0 + 20_000, 4, NO_DLQ, max_batches=2))
    assert len(later.deliveries) == 2


async def test_concurrent_claims_never_lease_one_message_twice(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(100))
    claims = await asyncio.gather(
        *(store.claim(q, Claim(7, T0, T0 + 60_000, 4, NO_DLQ)) for _ in range(20))
    )
    ids = [d.id for c in claims for d in c.deliveries]
    assert len(ids) == len(set(ids)) == 100


async def test_retry_keeps_the_attempt_and_release_gives_it_back(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2))
    a, b = (await store.claim(q, Claim(2, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    await store.settle(q, [], [Retry(a.seq, T0 + 10)], [], NO_DLQ, T0)
    await store.release(q, [b.seq], T0)
    again = (await store.claim(q, Claim(2, T0 + 10, T0 + 60_000, 4, NO_DLQ))).deliveries
    assert {d.id: d.attempts for d in again} == {a.id: 2, b.id: 1}


async def test_release_of_another_kind_of_lease_touches_nothing(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(1))
    [d] = (await store.claim(q, Claim(1, T0, T0 + 60_000, 4, NO_DLQ, LeaseKind.PULL))).deliveries
    assert await store.release(q, [d.seq], T0, LeaseKind.PUSH) == 0
    assert (await store.ready(q, T0, 10)).count == 0


async def test_queue_stats_count_not_ready_and_leased(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(3))
    await store.enqueue(q, msgs(2, delay_ms=5000, prefix="d"))
    await store.claim(q, Claim(1, T0, T0 + 60_000, 4, NO_DLQ))
    stats = await store.queue_stats(T0)
    assert stats[q.key] == (3, 1)
    assert stats[q.key].not_ready == 3 and stats[q.key].leased == 1


async def test_backlog_counts_follow_acks_dead_letters_and_purges(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("dlq", "local", None, T0)
    await store.enqueue(q, msgs(5, body=b"1234"))
    d = (await store.claim(q, Claim(3, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    await store.settle(q, [d[0].seq], [], [d[1].seq], DeadLetter(dlq), T0)
    assert ((await store.backlog(q)).count, (await store.backlog(q)).bytes) == (3, 12)
    assert ((await store.backlog(dlq)).count, (await store.backlog(dlq)).bytes) == (1, 4)
    assert store.backlog_count(q) == 3
    await store.purge(q, T0)
    assert (await store.backlog(q)).count == 0 and store.backlog_count(q) == 0


async def test_watch_fires_on_retry_and_release(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2))
    a, b = (await store.claim(q, Claim(2, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    ev = store.watch(q)
    await store.settle(q, [], [Retry(a.seq, T0)], [], NO_DLQ, T0)
    await asyncio.wait_for(ev.wait(), 5)
    ev = store.watch(q)
    await store.release(q, [b.seq], T0)
    await asyncio.wait_for(ev.wait(), 5)


async def test_a_cron_tick_is_claimed_once_and_an_older_one_never_after_a_newer(store):
    assert await store.cron_last_ticks() == {}
    assert await store.claim_cron_tick("app|* * * * *", T0, store.node_id)
    assert not await store.claim_cron_tick("app|* * * * *", T0, "another-node")
    assert not await store.claim_cron_tick("app|* * * * *", T0 - 60_000, store.node_id)
    assert await store.claim_cron_tick("app|* * * * *", T0 + 60_000, "another-node")
    assert await store.claim_cron_tick("app|0 * * * *", T0, store.node_id)  # its own schedule
    assert await store.cron_last_ticks() == {"app|* * * * *": T0 + 60_000, "app|0 * * * *": T0}


async def test_of_concurrent_claims_of_one_cron_tick_exactly_one_wins(store):
    won = await asyncio.gather(*(store.claim_cron_tick("s", T0, f"n{i}") for i in range(8)))
    assert sorted(won) == [False] * 7 + [True]


async def test_claimed_cron_ticks_survive_a_restart(open_store):
    s = await open_store()
    await s.claim_cron_tick("app|*/5 * * * *", T0, s.node_id)
    await s.close()
    s2 = await open_store(T0 + 5)
    assert await s2.cron_last_ticks() == {"app|*/5 * * * *": T0}
    assert not await s2.claim_cron_tick("app|*/5 * * * *", T0, s2.node_id)


async def test_a_lease_that_lapses_partly_acked_brings_back_only_the_rest(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(4))
    d = (await store.claim(q, Claim(4, T0, T0 + 1000, 9, NO_DLQ))).deliveries
    await store.settle(q, [d[0].seq, d[2].seq], [], [], NO_DLQ, T0 + 10)
    assert (await store.claim(q, Claim(10, T0 + 999, T0 + 5000, 9, NO_DLQ))).deliveries == []
    again = (await store.claim(q, Claim(10, T0 + 1001, T0 + 5000, 9, NO_DLQ))).deliveries
    assert sorted((x.id, x.attempts) for x in again) == [(d[1].id, 2), (d[3].id, 2)]
    assert all(x.first_received_ms == T0 for x in again)
    await store.settle(q, [x.seq for x in again], [], [], NO_DLQ, T0 + 1002)
    assert (await store.backlog(q)).count == 0
    assert (await store.claim(q, Claim(10, T0 + 9000, T0 + 10_000, 9, NO_DLQ))).deliveries == []


async def test_a_message_made_invisible_longer_is_still_acked_by_its_lease(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(2))
    a, b = (await store.claim(q, Claim(2, T0, T0 + 1000, 9, NO_DLQ))).deliveries
    # SQS ChangeMessageVisibility: both stay out of sight until T0 + 5000, past the lease
    await store.settle(q, [], [Retry(a.seq, T0 + 5000), Retry(b.seq, T0 + 5000)], [], NO_DLQ, T0)
    assert (await store.claim(q, Claim(10, T0 + 2000, T0 + 9000, 9, NO_DLQ))).deliveries == []
    stats = (await store.queue_stats(T0 + 2000))[q.key]
    assert stats.not_ready == 2
    assert (await store.ready(q, T0 + 2000, 10)).next_visible_ms == T0 + 5000
    assert (await store.settle(q, [a.seq], [], [], NO_DLQ, T0 + 2000)).acked == 1
    [back] = (await store.claim(q, Claim(10, T0 + 5001, T0 + 9000, 9, NO_DLQ))).deliveries
    assert (back.id, back.attempts, back.first_received_ms) == (b.id, 2, T0)


async def test_a_delayed_send_waits_apart_then_comes_in_its_turn(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(1, delay_ms=3000, prefix="d"))
    await store.enqueue(q, msgs(2))
    assert (await store.backlog(q)).count == 3
    ready = await store.ready(q, T0, 10)
    assert (ready.count, ready.next_visible_ms) == (2, T0 + 3000)
    first = (await store.claim(q, Claim(10, T0, T0 + 9000, 9, NO_DLQ))).deliveries
    assert [x.id for x in first] == [m.id for m in msgs(2)]
    assert (await store.claim(q, Claim(10, T0 + 2999, T0 + 9000, 9, NO_DLQ))).deliveries == []
    [late] = (await store.claim(q, Claim(10, T0 + 3000, T0 + 9000, 9, NO_DLQ))).deliveries
    assert (late.id, late.attempts, late.first_received_ms) == (
        msgs(1, prefix="d")[0].id,
        1,
        T0 + 3000,
    )


async def test_the_oldest_message_counts_those_in_flight_held_apart_and_under_a_lapsed_lease(
    store,
):
    """The oldest message's send time (a batch's metadata, retention) counts a message
    whatever its state: claimed, held apart for a retry, or under a lease that lapsed and
    was not claimed again, after others behind it were acked."""
    q = await store.ensure_queue("jobs", "local", None, T0)
    for i in range(4):
        await store.enqueue(q, msgs(1, at=T0 + i, prefix=f"m{i}"))
    first = (await store.claim(q, Claim(1, T0 + 10, T0 + 1000, 9, NO_DLQ))).deliveries
    behind = (await store.claim(q, Claim(2, T0 + 10, T0 + 60_000, 9, NO_DLQ))).deliveries
    await store.settle(q, [behind[0].seq], [], [], NO_DLQ, T0 + 10)
    assert (await store.backlog(q)).oldest_ms == T0  # claimed, its lease alive
    await store.settle(q, [], [Retry(first[0].seq, T0 + 5000)], [], NO_DLQ, T0 + 20)
    assert (await store.backlog(q)).oldest_ms == T0  # held apart
    again = (await store.claim(q, Claim(2, T0 + 5000, T0 + 5100, 9, NO_DLQ))).deliveries
    assert {d.id for d in again} == {first[0].id, msgs(1, prefix="m3")[0].id}
    assert (await store.backlog(q)).oldest_ms == T0  # under a lease that lapses at T0 + 5100
    assert (await store.ready(q, T0 + 6000, 10)).count == 2
    assert (await store.backlog(q)).oldest_ms == T0  # lapsed, not claimed again yet
    await store.settle(q, [d.seq for d in again], [], [], NO_DLQ, T0 + 6000)
    assert (await store.backlog(q)).oldest_ms == T0 + 2  # the one left under the long lease
