"""The FIFO part of the store contract, on every backend: group order, group blocking,
the hold-back rule of a retry, deduplication, sequence numbers, dead-letter moves.

Time is integers passed in (an injected clock), so the five-minute window is tested exactly.
"""

from __future__ import annotations

import asyncio

import pytest

from ocd.errors import StoreError
from ocd.store import (
    DEDUP_WINDOW_MS,
    BrowseQuery,
    Claim,
    DeadLetter,
    LeaseKind,
    NewMessage,
    QueueSettings,
    Retry,
)
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)
LEASE = 60_000


def fmsg(group, n, at=T0, dedup=None, body=None):
    body = body if body is not None else f'"{group}-{n}"'.encode()
    return NewMessage(
        f"{group}-{n}".ljust(32, "0")[:32], "json", body, at, at, group, dedup or f"{group}-{n}"
    )


def names(deliveries):
    return [d.body.decode().strip('"') for d in deliveries]


async def fifo_queue(store, name="orders.fifo", **settings):
    return await store.ensure_queue(name, "local", QueueSettings(**settings), T0)


async def test_a_group_is_delivered_in_order_and_held_while_in_flight(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(3)] + [fmsg("b", 0)])
    first = (await store.claim(q, Claim(2, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert names(first) == ["a-0", "a-1"]
    # group a is in flight: its third message waits though it is visible; b goes out
    second = (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert names(second) == ["b-0"]
    assert (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries == []
    await store.settle(q, [d.seq for d in first], [], [], NO_DLQ, T0)
    third = (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert names(third) == ["a-2"]


async def test_sequence_numbers_increase_in_send_order_and_survive_redelivery(store):
    q = await fifo_queue(store)
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0), fmsg("b", 0), fmsg("a", 1)])
    seqs = [s.sequence for s in sent]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    _, more = await store.enqueue_fifo(q, [fmsg("c", 0)])
    assert more[0].sequence > seqs[-1]
    d = (await store.claim(q, Claim(10, T0, T0 + 1000, 4, NO_DLQ))).deliveries
    by_id = {x.id: x.sequence for x in d}
    assert by_id[sent[0].id] == seqs[0]
    # a lapsed lease: same sequence numbers on redelivery
    again = (await store.claim(q, Claim(10, T0 + 1000, T0 + 2000, 4, NO_DLQ))).deliveries
    assert {x.id: x.sequence for x in again} == by_id
    assert all(x.group in ("a", "b", "c") for x in again)


async def test_a_retried_head_blocks_its_group_and_takes_the_rest_of_its_batch_back(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(4)])
    d = (await store.claim(q, Claim(3, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d) == ["a-0", "a-1", "a-2"]
    # a-1 retried with a delay; a-0 acked; a-2 neither: it goes back with a-1, attempt returned
    s = await store.settle(q, [d[0].seq], [Retry(d[1].seq, T0 + 5000)], [], NO_DLQ, T0)
    assert (s.acked, s.retried) == (1, 1)
    assert (await store.claim(q, Claim(10, T0 + 4999, T0 + LEASE, 5, NO_DLQ))).deliveries == []
    r = await store.ready(q, T0 + 4999, 10)
    assert r.count == 0 and r.next_visible_ms == T0 + 5000
    again = (await store.claim(q, Claim(10, T0 + 5000, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(again) == ["a-1", "a-2", "a-3"]
    assert [x.attempts for x in again] == [2, 1, 1]


async def test_a_later_message_acked_explicitly_stays_acked_after_an_earlier_retry(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(3)])
    d = (await store.claim(q, Claim(3, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    await store.settle(q, [d[2].seq], [Retry(d[0].seq, T0)], [], NO_DLQ, T0)
    again = (await store.claim(q, Claim(10, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(again) == ["a-0", "a-1"]
    assert [x.attempts for x in again] == [2, 1]


async def test_a_poison_head_dead_letters_and_its_group_moves_on(store):
    q = await fifo_queue(store)
    dlq = await fifo_queue(store, "orders-dlq.fifo")
    await store.enqueue(q, [fmsg("a", i) for i in range(2)])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 2, NO_DLQ))).deliveries
    # the head fails for good; a-1 behind it goes back without spending an attempt
    s = await store.settle(q, [], [], [d[0].seq], DeadLetter(dlq), T0)
    assert s.dead_lettered == 1
    nxt = (await store.claim(q, Claim(10, T0, T0 + LEASE, 2, NO_DLQ))).deliveries
    assert names(nxt) == ["a-1"] and nxt[0].attempts == 1
    moved = (await store.claim(dlq, Claim(10, T0, T0 + LEASE, 2, NO_DLQ))).deliveries
    assert names(moved) == ["a-0"] and moved[0].group == "a" and moved[0].attempts == 1
    assert moved[0].sequence is not None


async def test_an_ack_of_a_moved_message_and_a_live_one_deletes_and_counts_the_live_one(store):
    # The writer may remember what it delivered; a message moved on since (dead-lettered
    # under its old seq) must neither be deleted nor counted by a later ack of that seq.
    q = await fifo_queue(store)
    dlq = await fifo_queue(store, "orders-dlq.fifo")
    await store.enqueue(q, [fmsg("a", 0), fmsg("b", 0), fmsg("b", 1)])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    a0, b0, b1 = sorted(d, key=lambda x: names([x]))
    assert (await store.settle(q, [], [], [a0.seq], DeadLetter(dlq), T0)).dead_lettered == 1
    s = await store.settle(q, [a0.seq, b0.seq], [], [], NO_DLQ, T0)
    assert s.acked == 1
    assert (await store.backlog(q)).count == 1 and (await store.backlog(dlq)).count == 1
    assert (await store.settle(q, [b0.seq, b1.seq], [], [], NO_DLQ, T0)).acked == 1  # b-0 twice
    assert (await store.backlog(q)).count == 0
    assert names((await store.claim(dlq, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries) == [
        "a-0"
    ]


async def test_an_ack_of_a_batch_purged_meanwhile_acks_and_counts_nothing(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(3)] + [fmsg("b", 0)])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert names(d) == ["a-0", "a-1", "a-2", "b-0"]
    await store.purge(q, T0)
    assert (await store.settle(q, [x.seq for x in d], [], [], NO_DLQ, T0)).acked == 0
    assert (await store.backlog(q)).count == 0
    await store.enqueue(q, [fmsg("a", 3)])
    assert (await store.backlog(q)).count == 1
    assert names((await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries) == ["a-3"]


async def test_acks_of_whole_runs_and_of_parts_delete_exactly_what_they_name(store):
    # A group's run acked whole may go as one range of its order rows: the messages sent
    # to the group after the claim, and those acked before, must come out as they would
    # one by one.
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(4)] + [fmsg("b", i) for i in range(2)])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert names(d) == ["a-0", "a-1", "a-2", "a-3", "b-0", "b-1"]
    a, b = d[:4], d[4:]
    await store.enqueue(q, [fmsg("a", 4, at=T0 + 1), fmsg("b", 2, at=T0 + 1)])
    assert (await store.settle(q, [x.seq for x in a[:2]], [], [], NO_DLQ, T0)).acked == 2
    s = await store.settle(q, [x.seq for x in a + b], [], [], NO_DLQ, T0)
    assert s.acked == 4  # a-2, a-3 and the whole of b; a-0 and a-1 were acked before
    assert (await store.backlog(q)).count == 2
    nxt = (await store.claim(q, Claim(10, T0 + 2, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert sorted(names(nxt)) == ["a-4", "b-2"]
    assert (await store.settle(q, [x.seq for x in nxt], [], [], NO_DLQ, T0 + 2)).acked == 2
    assert (await store.backlog(q)).count == 0


async def test_exhausted_heads_found_at_claim_dead_letter_and_the_group_continues(store):
    q = await fifo_queue(store)
    dlq = await fifo_queue(store, "orders-dlq.fifo")
    await store.enqueue(q, [fmsg("a", 0)])
    await store.claim(q, Claim(10, T0, T0 + 1000, 1, NO_DLQ))  # its only attempt, then a crash
    await store.enqueue(q, [fmsg("a", 1, at=T0 + 1)])
    c = await store.claim(q, Claim(10, T0 + 1000, T0 + 9000, 1, DeadLetter(dlq)))
    assert len(c.exhausted) == 1
    assert names(c.deliveries) == ["a-1"]
    assert (await store.backlog(dlq)).count == 1


async def test_release_returns_a_group_to_its_head_without_spending_attempts(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(2)])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert await store.release(q, [x.seq for x in d], T0) == 2
    again = (await store.claim(q, Claim(10, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(again) == ["a-0", "a-1"] and [x.attempts for x in again] == [1, 1]


async def test_pull_retry_of_the_head_takes_back_the_rest_of_its_lease(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(3)])
    d = (await store.claim(q, Claim(3, T0, T0 + LEASE, 5, NO_DLQ, kind=LeaseKind.PULL))).deliveries
    # the client retries the head at once and says nothing of the others
    await store.settle(q, [], [Retry(d[0].seq, T0)], [], NO_DLQ, T0)
    again = (
        await store.claim(q, Claim(10, T0, T0 + LEASE, 5, NO_DLQ, kind=LeaseKind.PULL))
    ).deliveries
    assert names(again) == ["a-0", "a-1", "a-2"]


async def test_explicit_dedup_ids_store_nothing_within_five_minutes_even_after_ack(store):
    q = await fifo_queue(store)
    _, first = await store.enqueue_fifo(q, [fmsg("a", 0, dedup="order-9")])
    d = (await store.claim(q, Claim(10, T0, T0 + LEASE, 5, NO_DLQ))).deliveries
    await store.settle(q, [d[0].seq], [], [], NO_DLQ, T0)
    late = T0 + DEDUP_WINDOW_MS - 1
    b, dup = await store.enqueue_fifo(q, [fmsg("b", 0, at=late, dedup="order-9")])
    assert dup[0].duplicate and dup[0].id == first[0].id
    assert dup[0].sequence == first[0].sequence
    assert b.count == 0
    _, fresh = await store.enqueue_fifo(q, [fmsg("b", 1, at=T0 + DEDUP_WINDOW_MS, dedup="order-9")])
    assert not fresh[0].duplicate and fresh[0].sequence > first[0].sequence
    assert (await store.backlog(q)).count == 1
    # the id's window starts again with the message it now names
    _, again = await store.enqueue_fifo(
        q, [fmsg("c", 0, at=T0 + DEDUP_WINDOW_MS + 1, dedup="order-9")]
    )
    assert again[0].duplicate and again[0].id == fresh[0].id
    assert again[0].sequence == fresh[0].sequence


async def test_duplicates_inside_one_batch_collapse_to_the_first(store):
    q = await fifo_queue(store)
    b, sent = await store.enqueue_fifo(
        q, [fmsg("a", 0, dedup="x"), fmsg("a", 1, dedup="x"), fmsg("a", 2, dedup="y")]
    )
    assert [s.duplicate for s in sent] == [False, True, False]
    assert sent[1].id == sent[0].id
    assert b.count == 2


async def test_group_scoped_dedup_lets_the_same_id_into_two_groups(store):
    q = await fifo_queue(store, deduplication_scope="message_group")
    _, sent = await store.enqueue_fifo(
        q, [fmsg("a", 0, dedup="x"), fmsg("b", 0, dedup="x"), fmsg("a", 1, dedup="x")]
    )
    assert [s.duplicate for s in sent] == [False, False, True]


async def test_queue_scoped_dedup_refuses_the_same_id_in_another_group(store):
    q = await fifo_queue(store)
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0, dedup="x"), fmsg("b", 0, dedup="x")])
    assert [s.duplicate for s in sent] == [False, True]


async def test_purge_clears_messages_groups_and_the_dedup_window(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", i) for i in range(3)])
    await store.claim(q, Claim(1, T0, T0 + LEASE, 5, NO_DLQ))
    await store.purge(q, T0 + 1)
    assert (await store.backlog(q)).count == 0
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0, at=T0 + 2)])
    assert not sent[0].duplicate
    d = (await store.claim(q, Claim(10, T0 + 2, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d) == ["a-0"]  # the in-flight message's group is not blocked any more


async def test_dedup_window_and_group_order_survive_a_restart(open_store):
    s1 = await open_store()
    q = await fifo_queue(s1)
    await s1.enqueue(q, [fmsg("a", i) for i in range(3)])
    await s1.claim(q, Claim(2, T0, T0 + LEASE, 5, NO_DLQ))  # in flight when the node goes
    await s1.close()
    s2 = await open_store(T0 + 10)
    q2 = s2.queue("orders.fifo")
    assert q2 is not None
    _, sent = await s2.enqueue_fifo(q2, [fmsg("a", 0, at=T0 + 10)])
    assert sent[0].duplicate
    d = (await s2.claim(q2, Claim(10, T0 + 10, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d) == ["a-0", "a-1", "a-2"]  # the head first, never a later one


async def test_expired_dedup_ids_are_pruned(store):
    q = await fifo_queue(store)
    await store.enqueue_fifo(q, [fmsg("a", i) for i in range(5)])
    await store.expire(T0 + DEDUP_WINDOW_MS)
    # the ids are gone from the window: the same ids are new again
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0, at=T0 + DEDUP_WINDOW_MS)])
    assert not sent[0].duplicate


async def test_retention_expiry_unblocks_a_group(store):
    q = await fifo_queue(store, message_retention_period_s=60)
    await store.enqueue(q, [fmsg("a", 0)])
    await store.claim(q, Claim(10, T0, T0 + 3_600_000, 5, NO_DLQ))
    await store.enqueue(q, [fmsg("a", 1, at=T0 + 30_000)])
    await store.expire(T0 + 61_000)  # the in-flight head is past retention
    d = (await store.claim(q, Claim(10, T0 + 61_000, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d) == ["a-1"]


async def test_concurrent_claims_never_hold_one_group_twice(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg(f"g{g}", i) for g in range(10) for i in range(5)])
    claims = await asyncio.gather(
        *(store.claim(q, Claim(3, T0, T0 + LEASE, 5, NO_DLQ)) for _ in range(8))
    )
    held: dict[str, int] = {}
    for c in claims:
        for g in {d.group for d in c.deliveries}:
            held[g] = held.get(g, 0) + 1
    assert held and all(n == 1 for n in held.values())


async def test_a_deep_group_does_not_hide_the_ready_count_of_others(store):
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("deep", i) for i in range(300)])
    await store.enqueue(q, [fmsg("b", 0, at=T0 + 1)])
    r = await store.ready(q, T0 + 1, 100)
    assert r.count == 100 and r.first_ready_ms == T0
    d = (await store.claim(q, Claim(100, T0 + 1, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d) == [f"deep-{i}" for i in range(100)]
    d2 = (await store.claim(q, Claim(100, T0 + 1, T0 + LEASE, 5, NO_DLQ))).deliveries
    assert names(d2) == ["b-0"]


async def test_peek_shows_group_and_sequence(store):
    q = await fifo_queue(store)
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0)])
    p = await store.peek(q, T0, 10)
    assert (p[0].group, p[0].sequence, p[0].dedup) == ("a", sent[0].sequence, "a-0")


async def test_the_oldest_message_counts_one_sent_earlier_behind_one_moved_in(store):
    """A message moved in from another FIFO queue can sit before one sent earlier by a clock
    that read less; the oldest message is still the earliest sent, after an ack makes the
    store look it up again."""
    q, other = await fifo_queue(store), await fifo_queue(store, "other.fifo")
    await store.enqueue(other, [fmsg("m", 0, at=T0 + 100)])
    [o] = await store.browse(other, T0 + 300, BrowseQuery())
    assert await store.move_messages(other, q, [o.seq], T0 + 300) == 1
    await store.enqueue(q, [fmsg("a", 0, at=T0 + 50), fmsg("b", 0, at=T0 + 60)])
    got = (await store.claim(q, Claim(3, T0 + 300, T0 + LEASE, 4, NO_DLQ))).deliveries
    assert sorted(names(got)) == ["a-0", "b-0", "m-0"]
    [b] = [d for d in got if names([d]) == ["b-0"]]
    await store.settle(q, [b.seq], [], [], NO_DLQ, T0 + 300)  # the store looks again
    assert (await store.backlog(q)).oldest_ms == T0 + 50


@pytest.mark.parametrize("kind", ["plain", "late", "attributes", "delayed"])
async def test_any_send_keeps_group_order_sequence_numbers_and_deduplication(store, kind):
    """Sends whose messages are all visible at once, in send order and without attributes
    (nearly all) are written the short way; a send with one message sent by a clock that
    read less, carrying attributes or waiting is written the long way.
    Both give the same sequence numbers, group order, backlog and deduplication."""
    q = await fifo_queue(store)
    await store.enqueue(q, [fmsg("a", 0, at=T0 + 10)])
    batch = [fmsg("a", 1, at=T0 + 10), fmsg("b", 0, at=T0 + 10), fmsg("a", 2, at=T0 + 11)]
    odd = fmsg("b", 1, at=T0 + 12)
    if kind == "late":
        odd = odd._replace(sent_ms=T0 + 5, visible_ms=T0 + 5)
    elif kind == "attributes":
        odd = odd._replace(attrs=b'{"k": "v"}')
    elif kind == "delayed":
        odd = odd._replace(visible_ms=T0 + 500)
    _, sent = await store.enqueue_fifo(q, [*batch, odd])
    seqs = [s.sequence for s in sent]
    assert seqs == list(range(seqs[0], seqs[0] + 4)) and not any(s.duplicate for s in sent)
    # the same ids again, within the window: the first send's messages, nothing stored
    _, again = await store.enqueue_fifo(q, [*batch, odd])
    assert [(s.id, s.sequence, s.duplicate) for s in again] == [
        (s.id, s.sequence, True) for s in sent
    ]
    b = await store.backlog(q)
    assert (b.count, b.oldest_ms) == (5, T0 + 5 if kind == "late" else T0 + 10)
    now = T0 + 1000
    got = []
    while True:
        d = (await store.claim(q, Claim(10, now, now + LEASE, 4, NO_DLQ))).deliveries
        if not d:
            break
        got += d
        await store.settle(q, [x.seq for x in d], [], [], NO_DLQ, now)
    by_group: dict[str, list[str]] = {}
    for d in got:
        by_group.setdefault(d.group, []).append(names([d])[0])
    assert by_group == {"a": ["a-0", "a-1", "a-2"], "b": ["b-0", "b-1"]}
    assert len(got) == 5
    assert {d.id: d.sequence for d in got if d.id in {s.id for s in sent}} == {
        s.id: s.sequence for s in sent
    }


async def test_a_message_without_a_group_is_refused_and_nothing_of_its_send_is_stored(store):
    """The producer never sends one; a store that took it would keep a message that no
    claim can reach."""
    q = await fifo_queue(store)
    with pytest.raises(StoreError):
        await store.enqueue_fifo(q, [fmsg("a", 0), fmsg("b", 0)._replace(group=None)])
    assert (await store.backlog(q)).count == 0
    _, sent = await store.enqueue_fifo(q, [fmsg("a", 0)])  # its id was not kept either
    assert not sent[0].duplicate
