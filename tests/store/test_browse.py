"""Conformance of the browsing operations the dashboard uses (every backend): keyset pages,
filters, one message by seq, bounded search and redrive moves. None of them leases, acks or
counts an attempt."""

from __future__ import annotations

import pytest

from ocd.errors import QueueNotFound
from ocd.store import (
    BrowseCursor,
    BrowseQuery,
    Claim,
    DeadLetter,
    Expired,
    NewMessage,
    QueueSettings,
    Retry,
    SearchQuery,
)
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)


def sent(n, at=T0, step_ms=1, prefix="m", delay_ms=0):
    return [
        NewMessage(
            f"{prefix}{i:031d}", "json", f'{{"n": {i}}}'.encode(), at + i * step_ms,
            at + i * step_ms + delay_ms,
        )
        for i in range(n)
    ]  # fmt: skip


async def test_browse_pages_by_cursor_in_send_order_both_ways(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(7))
    now = T0 + 100
    seen = []
    cursor = None
    while True:
        page = await store.browse(q, now, BrowseQuery(limit=3, after=cursor))
        if not page:
            break
        seen += [r.id for r in page]
        cursor = BrowseCursor(page[-1].sent_ms, page[-1].seq)
    assert seen == [m.id for m in sent(7)]
    newest = await store.browse(q, now, BrowseQuery(limit=3, newest_first=True))
    assert [r.id for r in newest] == [m.id for m in sent(7)][::-1][:3]
    after = BrowseCursor(newest[-1].sent_ms, newest[-1].seq)
    more = await store.browse(q, now, BrowseQuery(limit=10, newest_first=True, after=after))
    assert [r.id for r in more] == [m.id for m in sent(7)][::-1][3:]


async def test_messages_that_come_back_late_still_browse_search_and_expire_in_send_order(store):
    """A message can sit behind newer ones in delivery order: retried, handed back, delayed,
    moved in from another queue, or sent by a clock that read less. Browsing, search, the
    oldest message and retention still go by send time."""
    settings = QueueSettings(message_retention_period_s=60)
    q = await store.ensure_queue("jobs", "local", settings, T0)
    other = await store.ensure_queue("other", "local", None, T0)
    await store.enqueue(q, sent(3, at=T0 + 100, step_ms=100, prefix="a"))  # a0 a1 a2
    now = T0 + 400
    d = (await store.claim(q, Claim(2, now, now + 60_000, 5, NO_DLQ))).deliveries
    await store.settle(q, [], [Retry(d[0].seq, now + 100)], [], NO_DLQ, now)  # a0 retried
    assert await store.release(q, [d[1].seq], now) == 1  # a1 handed back
    await store.enqueue(q, sent(1, at=T0 + 50, prefix="s"))  # a clock that read less
    await store.enqueue(q, sent(1, at=T0 + 250, prefix="d", delay_ms=10_000))
    await store.enqueue(other, sent(1, at=T0 + 150, prefix="o"))
    [o] = await store.browse(other, now, BrowseQuery())
    assert await store.move_messages(other, q, [o.seq], now) == 1
    await store.enqueue(q, sent(2, at=T0 + 400, step_ms=100, prefix="b"))  # b0 b1
    order = ["s0", "a0", "o0", "a1", "d0", "a2", "b0", "b1"]
    short = lambda rows: [r.id[0] + r.id[-1] for r in rows]  # noqa: E731

    now = T0 + 1000
    for limit in (1, 2, 3, 8):
        for newest in (False, True):
            seen, cursor = [], None
            while page := await store.browse(
                q, now, BrowseQuery(limit=limit, after=cursor, newest_first=newest)
            ):
                assert len(page) <= limit
                seen += short(page)
                cursor = BrowseCursor(page[-1].sent_ms, page[-1].seq)
            assert seen == (order[::-1] if newest else order), (limit, newest)
    ranged = BrowseQuery(sent_from_ms=T0 + 120, sent_to_ms=T0 + 300)
    assert short(await store.browse(q, now, ranged)) == ["o0", "a1", "d0", "a2"]
    newest_ranged = BrowseQuery(sent_from_ms=T0 + 120, sent_to_ms=T0 + 300, newest_first=True)
    assert short(await store.browse(q, now, newest_ranged)) == ["a2", "d0", "a1", "o0"]
    found = await store.search(q, now, SearchQuery(b'"n": 0', None, 5, 10, 200))
    assert short(found.rows) == ["b0", "d0"] and found.scanned == 5  # b1 b0 a2 d0 a1
    assert (await store.backlog(q)).oldest_ms == T0 + 50

    expired = await store.expire(T0 + 60_260)  # sent before T0 + 260
    assert expired == [Expired("local", "jobs", 5)]
    assert short(await store.browse(q, now, BrowseQuery())) == ["a2", "b0", "b1"]
    b = await store.backlog(q)
    assert (b.count, b.oldest_ms) == (3, T0 + 300)


@pytest.mark.parametrize("came_in", ["delayed", "moved"])
async def test_the_oldest_message_counts_one_sent_earlier_behind_a_late_one(store, came_in):
    """A message appended late (a delay that ended, a move from another queue) can sit
    before one sent earlier by a clock that read less; the oldest message is still the
    earliest sent, after an ack makes the store look it up again."""
    q = await store.ensure_queue("jobs", "local", None, T0)
    if came_in == "delayed":
        await store.enqueue(q, sent(1, at=T0 + 100, prefix="l", delay_ms=100))
    else:
        other = await store.ensure_queue("other", "local", None, T0)
        await store.enqueue(other, sent(1, at=T0 + 100, prefix="l"))
        [o] = await store.browse(other, T0 + 300, BrowseQuery())
        assert await store.move_messages(other, q, [o.seq], T0 + 300) == 1
    now = T0 + 300
    [late] = (await store.claim(q, Claim(1, now, now + 60_000, 5, NO_DLQ))).deliveries
    await store.enqueue(q, sent(2, at=T0 + 50, step_ms=10, prefix="s"))  # s0 at T0 + 50
    got = (await store.claim(q, Claim(2, now, now + 60_000, 5, NO_DLQ))).deliveries
    assert [d.id[0] + d.id[-1] for d in got] == ["s0", "s1"]
    await store.settle(q, [got[1].seq], [], [], NO_DLQ, now)  # the store looks again
    assert (await store.backlog(q)).oldest_ms == T0 + 50
    assert (late.sent_ms, (await store.backlog(q)).count) == (T0 + 100, 2)


async def test_browse_never_leases_or_counts_attempts(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(3))
    for _ in range(2):
        rows = await store.browse(q, T0 + 10, BrowseQuery())
        assert [r.attempts for r in rows] == [0, 0, 0]
    claimed = await store.claim(q, Claim(10, T0 + 10, T0 + 60_000, 5, NO_DLQ))
    assert len(claimed.deliveries) == 3


async def test_browse_filters_by_state_attempts_and_time(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(4))  # sent T0..T0+3, ready
    await store.enqueue(q, sent(2, at=T0 + 10, prefix="d", delay_ms=60_000))  # delayed
    now = T0 + 20
    await store.claim(q, Claim(1, now, now + 60_000, 5, NO_DLQ))  # m0 in flight, 1 attempt
    ids = lambda rows: [r.id[:2] + r.id[-1] for r in rows]  # noqa: E731
    assert ids(await store.browse(q, now, BrowseQuery(state="ready"))) == ["m01", "m02", "m03"]
    assert ids(await store.browse(q, now, BrowseQuery(state="delayed"))) == ["d00", "d01"]
    inflight = await store.browse(q, now, BrowseQuery(state="inflight"))
    assert ids(inflight) == ["m00"] and inflight[0].leased and inflight[0].attempts == 1
    assert ids(await store.browse(q, now, BrowseQuery(min_attempts=1))) == ["m00"]
    ranged = BrowseQuery(sent_from_ms=T0 + 1, sent_to_ms=T0 + 2)
    assert ids(await store.browse(q, now, ranged)) == ["m01", "m02"]


async def test_browse_cuts_bodies_and_message_by_seq_reads_more(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    body = b'"' + b"x" * 500 + b'"'
    await store.enqueue(q, [NewMessage("a" * 32, "json", body, T0, T0)])
    (row,) = await store.browse(q, T0, BrowseQuery(body_bytes=10))
    assert row.body == body[:10] and row.size == len(body)
    full = await store.message(q, row.seq, 65_536)
    assert full is not None and full.body == body
    other = await store.ensure_queue("other", "local", None, T0)
    assert await store.message(other, row.seq, 10) is None


async def test_an_empty_body_browses_searches_and_reads_as_empty(store):
    """A text message "" is stored as zero bytes; every read of it must say so (SQLite's
    substr of an empty blob is NULL, which once answered a browse with a 500)."""
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, [NewMessage("e" * 32, "text", b"", T0, T0)])
    (row,) = await store.browse(q, T0, BrowseQuery())
    assert row.body == b"" and row.size == 0
    full = await store.message(q, row.seq, 65_536)
    assert full is not None and full.body == b""
    found = await store.search(q, T0, SearchQuery(None, "e" * 32, 100, 10, 200))
    assert [r.body for r in found.rows] == [b""]


async def test_present_tells_which_seqs_the_queue_holds(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    other = await store.ensure_queue("other", "local", None, T0)
    await store.enqueue(q, sent(3))
    await store.enqueue(other, sent(1, prefix="o"))
    seqs = [r.seq for r in await store.browse(q, T0, BrowseQuery())]
    [elsewhere] = [r.seq for r in await store.browse(other, T0, BrowseQuery())]
    await store.delete_messages(q, seqs[:1])
    asked = [*seqs, elsewhere, max(seqs) + 1000]
    assert sorted(await store.present(q, asked)) == seqs[1:]
    assert await store.present(q, []) == []
    many = [*range(1, 10_001 - len(seqs)), *seqs]  # a move's most, in one query
    assert sorted(await store.present(q, many)) == seqs[1:]


async def test_search_scans_only_the_newest_window(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(10))  # bodies {"n": 0} .. {"n": 9}
    found = await store.search(q, T0, SearchQuery(b'"n": 1', None, 100, 10, 200))
    assert [r.id[-1] for r in found.rows] == ["1"] and found.scanned == 10
    # n=1 is the second oldest: outside a window of the newest five
    bounded = await store.search(q, T0, SearchQuery(b'"n": 1', None, 5, 10, 200))
    assert bounded.rows == [] and bounded.scanned == 5
    by_id = await store.search(q, T0, SearchQuery(None, sent(10)[7].id, 100, 10, 200))
    assert [r.id for r in by_id.rows] == [sent(10)[7].id]


async def test_an_id_no_message_can_have_matches_nothing(store):
    """A NUL or a lone surrogate in the id asked for (JSON lets a client send both) is no
    message's id: an empty answer, not a database error."""
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(3))
    for bad in ("\x00", "a\x00b", "\udb6c", "\u00faf\u000f\udb6c\udc10"):
        found = await store.search(q, T0, SearchQuery(None, bad, 100, 10, 200))
        assert found.rows == [] and found.scanned == 3, bad
    # a needle may hold any bytes, NUL included
    found = await store.search(q, T0, SearchQuery(b"\x00\xed\xa0\x80", None, 100, 10, 200))
    assert found.rows == [] and found.scanned == 3


async def test_move_messages_redrives_with_attempts_reset_and_counts_kept(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(dlq, sent(3))
    c = await store.claim(dlq, Claim(3, T0 + 2, T0 + 3, 5, NO_DLQ))  # attempt 1, lapses at T0+3
    seqs = [d.seq for d in c.deliveries]
    moved = await store.move_messages(dlq, src, seqs[:2], T0 + 5)
    assert moved == 2
    assert (await store.backlog(dlq)).count == 1
    assert (await store.backlog(src)).count == 2
    rows = await store.browse(src, T0 + 5, BrowseQuery(state="ready"))
    assert [r.attempts for r in rows] == [0, 0]
    assert await store.move_messages(dlq, src, seqs[:2], T0 + 5) == 0  # already moved


async def test_move_messages_to_a_deleted_queue_deletes_nothing(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(dlq, sent(2))
    rows = await store.browse(dlq, T0, BrowseQuery())
    await store.delete_queue(src)
    with pytest.raises(QueueNotFound):
        await store.move_messages(dlq, src, [r.seq for r in rows], T0)
    assert (await store.backlog(dlq)).count == 2


async def test_search_with_thousands_of_matches_returns_the_newest(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(2_500))  # every body matches b'"n"'
    found = await store.search(q, T0, SearchQuery(b'"n"', None, 100_000, 3, 200))
    assert [r.id for r in found.rows] == [m.id for m in sent(2_500)][::-1][:3]
    few = await store.search(q, T0, SearchQuery(b'"n": 2499', None, 100_000, 3, 200))
    assert [r.id for r in few.rows] == [sent(2_500)[-1].id]
