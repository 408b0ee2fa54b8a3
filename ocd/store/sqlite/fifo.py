"""FIFO queues on SQLite: sends with deduplication and sequence numbers, group-ordered
claims, and the bookkeeping that keeps ``fifo_groups`` true.

A FIFO message's row in ``messages`` is written once, at its send, in its queue's band of
seqs (send order); what changes about it (visibility, attempts, first receive, lease) is
its row in ``fifo_order``, narrow and kept in group order, so that a claim, an ack or a
retry of a group's run touches the few pages that hold that group's rows.

Each function runs inside one writer transaction (``Tx``). ``fifo_groups`` holds one row
per group with messages, ``ready_ms`` being when its head (lowest ``fseq``) is visible; every
operation that deletes, moves, leases or hands back FIFO messages refreshes the rows of the
groups it touched before it returns, so that the next operation in the same transaction
already sees them. The rules are the contract's (``ocd.store.base``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from ocd.errors import QueueNotFound, StoreError
from ocd.store import rules
from ocd.store.sqlite import layout, sql
from ocd.store.sqlite.ops import IN_CHUNK, Run, Tx, chunks, fetch_all, fetch_one, marks
from ocd.store.values import DEDUP_WINDOW_MS, FifoSent, NewMessage, QueueRecord, Retry

# The messages of one lease behind a retried one lie within this many of its group (a batch
# is at most 100 messages, taken consecutively from the head).
BATCH_SPAN = 1000


# group_runs' rows in the order a claim takes them: group by group, each in its order.
_BY_GROUP_AND_PLACE = itemgetter(0, 3)

# Rows per multi-row statement: SQLite allows 32,766 parameters, eleven a message.
SEND_ROWS = 100


def enqueue(tx: Tx, queue: QueueRecord, messages: Sequence[NewMessage]) -> list[FifoSent]:
    """A few multi-row statements per send, not several per message: store the send's
    deduplication ids (or, if one was still in its window, find those and store the new
    ones), then insert the messages, their order rows and their groups."""
    conn = tx.conn
    key = queue.key
    if any(m.group is None for m in messages):  # it would be stored and never delivered
        raise StoreError(f"send failed: a message to the FIFO queue {queue.name} has no group")
    row = fetch_one(conn, sql.FIFO_LAST_SEQ, (key,))
    if row is None:
        raise QueueNotFound(queue.name)
    last: int = row[0]
    by_group = queue.settings.deduplication_scope == "message_group"
    keys = [((m.group or "") if by_group else "", m.dedup or "") for m in messages]
    now = min(m.sent_ms for m in messages)
    seen: dict[tuple[str, str], FifoSent] = {}
    unique = list(dict.fromkeys(keys))
    # Ids seldom repeat: store them all at once, and look them up only if one did.
    stored = len(unique) == len(keys) and _put_new_ids(conn, key, keys, messages, last, now)
    for i in range(0, 0 if stored else len(unique), SEND_ROWS):
        chunk = unique[i : i + SEND_ROWS]
        params = [*chain.from_iterable(chunk), key, now]
        for scope, dedup, mid, fseq in fetch_all(conn, sql.dedup_find(len(chunk)), params):
            seen[(scope, dedup)] = FifoSent(mid, fseq, False)
    out: list[FifoSent] = []
    fresh: list[tuple[NewMessage, tuple[str, str]]] = []
    for m, k in zip(messages, keys, strict=True):
        earlier = seen.get(k)
        if earlier is not None:
            out.append(FifoSent(earlier.id, earlier.sequence, True))
            continue
        last += 1
        seen[k] = sent = FifoSent(m.id, last, False)
        out.append(sent)
        fresh.append((m, k))
    if not fresh:
        return out
    # The rows at the tail of the queue's band, in send order: a group's rows in the order
    # of their sequence numbers, as the cut needs; late if sent before the floor (layout.py).
    # The fresh messages' sequence numbers are the last ones given, in send order.
    base, floor = layout.take_sent(tx, key, len(fresh), max(m.sent_ms for m, _ in fresh))
    first = last - len(fresh) + 1
    if not stored:
        ids: list[Any] = []
        for fseq, (m, (scope, dedup)) in enumerate(fresh, first):
            ids += (key, scope, dedup, m.sent_ms + DEDUP_WINDOW_MS, m.id, fseq)
        _insert(conn, sql.dedup_put, ids, 6)
    if _in_order(fresh, floor):
        heads, size = _insert_in_order(conn, key, base, first, fresh)
    else:
        heads, size = _insert_rows(conn, key, base, first, floor, fresh)
    conn.execute(sql.FIFO_SET_SEQ, (last, key))
    added: list[Any] = []
    for g, (visible_ms, seq) in heads.items():
        added += (key, g, visible_ms, seq)
    _insert(conn, sql.add_groups, added, 4)
    tx.added(key, len(fresh), size, min(m.sent_ms for m, _ in fresh))
    return out


def _in_order(fresh: Sequence[tuple[NewMessage, Any]], floor: int) -> bool:
    """Whether every message is visible at its send, was sent no earlier than the one
    before it (and than ``floor``: none is late) and has no attributes: nearly every send,
    whose rows ``_insert_in_order`` writes with the fewest bindings."""
    for m, _ in fresh:
        sent = m.sent_ms
        if sent < floor or m.visible_ms != sent or m.attrs is not None:
            return False
        floor = sent
    return True


def _insert_in_order(
    conn: sqlite3.Connection,
    key: int,
    base: int,
    first: int,
    fresh: Sequence[tuple[NewMessage, Any]],
) -> tuple[dict[str, tuple[int, int]], int]:
    """The rows and order rows of messages ``_in_order``, under seqs from ``base`` and
    sequence numbers from ``first``: each group's first (visibility, seq), and their size."""
    heads: dict[str, tuple[int, int]] = {}
    size = 0
    for i in range(0, len(fresh), SEND_ROWS):
        part = fresh[i : i + SEND_ROWS]
        rows: list[Any] = [key, base + i, first + i]
        order: list[Any] = [key, base + i, first + i]
        for seq, (m, _) in enumerate(part, base + i):
            body = m.body
            group = m.group
            sent_ms = m.sent_ms
            rows += (m.id, m.content_type, body, sent_ms, group, m.dedup)
            order += (group, sent_ms)
            if group not in heads:
                heads[group] = (sent_ms, seq)  # type: ignore[index]
            size += len(body)
        conn.execute(sql.insert_fifo_in_order(len(part)), rows)
        conn.execute(sql.insert_order_in_order(len(part)), order)
    return heads, size


def _insert_rows(
    conn: sqlite3.Connection,
    key: int,
    base: int,
    first: int,
    floor: int,
    fresh: Sequence[tuple[NewMessage, Any]],
) -> tuple[dict[str, tuple[int, int]], int]:
    """``_insert_in_order`` for any messages: every value bound, each row late if it was
    sent before ``floor`` or a row before it (layout.py)."""
    rows: list[Any] = []  # each statement's parameters, flat
    order: list[Any] = []
    heads: dict[str, tuple[int, int]] = {}
    size = 0
    for fseq, (seq, (m, _)) in enumerate(enumerate(fresh, base), first):
        sent_ms = m.sent_ms
        late = 1  # an int, not a bool: ops.py
        if sent_ms >= floor:
            floor = sent_ms
            late = 0
        body = m.body
        group = m.group
        rows += (seq, key, m.id, m.content_type, body, len(body), sent_ms, m.visible_ms,
                 group, m.dedup, fseq, m.attrs, late)  # fmt: skip
        order += (key, group, fseq, seq, m.visible_ms)
        if group not in heads:
            heads[group] = (m.visible_ms, seq)  # type: ignore[index]
        size += len(body)
    _insert(conn, sql.insert_fifo, rows, 13)
    _insert(conn, sql.insert_order, order, 5)
    return heads, size


def _put_new_ids(
    conn: sqlite3.Connection,
    key: int,
    keys: list[tuple[str, str]],
    messages: Sequence[NewMessage],
    last: int,
    now: int,
) -> bool:
    """Store the deduplication ids of a send in which none repeats, each message under the
    next sequence number, unless one is still in its window: whether they were (if not,
    nothing was: the caller looks them up first)."""
    put = 0
    conn.execute("SAVEPOINT ids")
    for i in range(0, len(keys), SEND_ROWS):
        part = keys[i : i + SEND_ROWS]
        params: list[Any] = [key, last + 1 + i, now]
        for (scope, dedup), m in zip(part, messages[i : i + SEND_ROWS], strict=True):
            params += (scope, dedup, m.sent_ms, m.id)
        put += conn.execute(sql.dedup_put_new(len(part)), params).rowcount
    if put != len(keys):
        conn.execute("ROLLBACK TO ids")
    conn.execute("RELEASE ids")
    return put == len(keys)


def _insert(
    conn: sqlite3.Connection, statement: Any, flat: list[Any], width: int, *after: Any
) -> int:
    """Multi-row INSERTs of ``flat`` parameters, ``width`` a row, ``SEND_ROWS`` rows each,
    each statement's ``after`` parameters last: the rows they wrote."""
    step = SEND_ROWS * width
    written = 0
    for i in range(0, len(flat), step):
        part = flat[i : i + step]
        params = [*part, *after] if after else part
        written += conn.execute(statement(len(part) // width), params).rowcount
    return written


def refresh(tx: Tx, key: int, groups: Iterable[str | None]) -> None:
    """Make the rows of ``groups`` true again: the head's visibility, or gone if empty. Two
    statements per few hundred groups, whatever their number."""
    touched = [g for g in set(groups) if g is not None]
    for i in range(0, len(touched), IN_CHUNK):
        part = touched[i : i + IN_CHUNK]
        drop, put = sql.refresh_groups(len(part))
        tx.conn.execute(drop, (key, *part))
        tx.conn.execute(put, (key, *part))
    cut(tx, key)


# Dead rows cut a call at most: the rest at the next.
CUT_MOST = 20_000


def cut(tx: Tx, key: int) -> None:
    """Delete the dead rows at the front of a FIFO queue's band, in one range: every FIFO row
    below the lowest head of its groups (or below its tail, with no group left)."""
    row = fetch_one(tx.conn, sql.FIFO_CUT_AT, (key,))
    if row is None:
        return
    at, tail, low, _ = row
    upto = min(layout.seq_of(key, tail) if low is None else low, at + CUT_MOST)
    if upto > at:
        tx.conn.execute(sql.CUT_FIFO, (at, upto, key))
        tx.conn.execute(sql.SET_CURSOR, (upto, key))


# A queue whose cut has this many rows behind it, held by one group's head (a message
# retried again and again, a paused group), moves that group to its tail, if the group has
# at most COMPACT_MOST messages and none under a lease; the dead rows behind it can then be
# cut.
COMPACT_AFTER = 100_000
COMPACT_MOST = 10_000


def compact(tx: Tx, key: int) -> None:
    """Compaction, from the retention sweep (it writes rows: not in an ack, which must pass
    on a full disk): the group that holds a FIFO queue's cut with COMPACT_AFTER rows behind
    it is appended anew, and the cut moves on. A group found too large or leased is not
    looked at again until as many rows again have come."""
    row = fetch_one(tx.conn, sql.FIFO_CUT_AT, (key,))
    if row is None:
        return
    at, tail, low, tried = row
    end = layout.seq_of(key, tail)
    if low is None or low > at or end - max(at, tried or 0) <= COMPACT_AFTER:
        return
    if not _compact(tx, key, low):
        tx.conn.execute(sql.COMPACT_TRIED, (end, key))


def _compact(tx: Tx, key: int, head: int) -> bool:
    """The group whose head is ``head`` appended anew at the queue's tail, in order (its
    order rows follow; nothing else about its messages changes), and the queue cut."""
    conn = tx.conn
    found = fetch_one(conn, sql.PINNING_GROUP, (key, head))
    if found is None:
        return False
    (grp,) = found
    rows = fetch_all(conn, sql.GROUP_ROWS, (key, grp, COMPACT_MOST + 1))
    if not rows or len(rows) > COMPACT_MOST or any(lease is not None for *_, lease in rows):
        return False  # a lease names its messages by seq: a leased group stays
    base = layout.take(tx, key, len(rows))
    old = json.dumps([seq for _, seq, _ in rows])
    conn.execute(sql.COPY_ROWS, {"base": base, "seqs": old})
    conn.executemany(
        sql.REPOINT_ORDER, ((base + i, key, grp, fseq) for i, (fseq, _, _) in enumerate(rows))
    )
    conn.execute(sql.DELETE_ROWS, (old,))
    refresh(tx, key, [grp])  # its new head; the cut moves on past it
    return True


def claim(
    tx: Tx,
    queue: QueueRecord,
    limit: int,
    now_ms: int,
    until_ms: int,
    lease: int,
    kind: int,
) -> list[tuple[Any, ...]]:
    """Lease the ready heads and the ready runs behind them, longest-waiting group first;
    the claimed rows in delivery order (group by group, in sequence order).

    Two statements to choose them, not one per group: the ready groups (a range of
    fifo_groups_ready), then their runs in one compound read row by row and left as soon
    as the batch is full, so that SQLite never reads the runs of the groups the batch does
    not reach (a run may be as long as the batch: asked for whole, a hundred groups' runs
    were up to fifty times the batch)."""
    conn = tx.conn
    groups = [g for (g,) in fetch_all(conn, sql.READY_GROUPS, (queue.key, now_ms, limit))]
    if not groups:
        return []
    ask = sql.group_runs(len(groups))
    params = [queue.key, limit, *groups]
    cur = conn.execute(ask, params)
    try:
        chosen = _choose(cur, groups, limit, now_ms)
    finally:
        cur.close()
    if chosen is None:  # the compound's rows came out of order: read them all and sort
        found = fetch_all(conn, ask, params)
        found.sort(key=_BY_GROUP_AND_PLACE)
        chosen = _choose(found, groups, limit, now_ms)
        assert chosen is not None
    picked, leased, taken, stale = chosen
    if stale:
        refresh(tx, queue.key, stale)
    if not picked:
        return []
    # the runs and their groups in statements of IN_CHUNK (one a group cost a statement's
    # start each): the runs leased, the groups' heads visible when their leases end
    claimed = list(taken.items())
    for i in range(0, len(claimed), IN_CHUNK):
        part = claimed[i : i + IN_CHUNK]
        leasing: list[Any] = [until_ms, lease, kind, now_ms, queue.key]
        for g, r in part:
            leasing += (g, r.lo, r.hi)
        conn.execute(sql.claim_runs(len(part)), leasing)
        conn.execute(sql.set_groups(len(part)), (queue.key, until_ms, *(g for g, _ in part)))
    rows: list[tuple[Any, ...]] = []
    learnt = tx.learnt
    for seq, mid, ct, body, sent, grp, fseq, dedup, attrs, size in fetch_all(
        conn, sql.CLAIMED_ROWS, (json.dumps(picked),)
    ):
        attempts, first = leased[seq]
        rows.append((seq, mid, ct, body, sent, attempts, grp, fseq, dedup, attrs, first))
        if grp is not None:
            learnt[seq] = (grp, fseq, size, taken[grp])
    order = {seq: i for i, seq in enumerate(picked)}
    rows.sort(key=lambda r: order[r[0]])
    return rows


_Chosen = tuple[list[int], dict[int, tuple[int, int]], dict[str, Run], list[str]]


def _choose(
    rows: Iterable[tuple[Any, ...]], groups: Sequence[str], limit: int, now_ms: int
) -> _Chosen | None:
    """From ``group_runs``' rows (group by group, each in sequence order) the batch: the
    seqs picked, each one's attempts and first receive under the lease, each group's run,
    and the groups whose rows were behind the truth (asked as ready, none ready). Stops
    reading at the batch's last row; None if the rows were not in that order."""
    picked: list[int] = []
    leased: dict[int, tuple[int, int]] = {}
    taken: dict[str, Run] = {}
    stale: list[str] = []
    at = -1  # the group whose rows are being read
    run: list[tuple[int, int]] = []
    stopped = False
    last = 0

    def close() -> None:
        if at < 0:
            return
        if not run:
            stale.append(groups[at])
            return
        picked.extend(seq for seq, _ in run)
        taken[groups[at]] = Run(run[0][1], run[-1][1], len(run), max(seq for seq, _ in run))

    full = False
    for i, seq, visible_ms, fseq, attempts, first in rows:
        if i != at:
            if i < at:
                return None
            close()
            stale += groups[at + 1 : i]
            at, run, stopped = i, [], False
        elif fseq <= last:
            return None
        last = fseq
        if stopped:
            continue
        if visible_ms > now_ms:
            stopped = True  # the run ends at a message not visible yet
            continue
        run.append((seq, fseq))
        # under the lease: one more attempt; the first receive is this one if none
        leased[seq] = (attempts + 1, now_ms if first is None else first)
        if len(picked) + len(run) == limit:
            full = True
            break
    close()
    if not full:
        stale += groups[at + 1 :]
    return picked, leased, taken, stale


def hold_back(
    tx: Tx,
    queue: QueueRecord,
    acks: Collection[int],
    retries: Sequence[Retry],
    dead: Sequence[int],
) -> rules.HoldBack:
    """``rules.hold_back`` over this settle's rows."""
    failing = rules.failing_seqs(retries, dead)
    if not failing:
        return rules.unchanged(retries, dead)
    heads = rules.group_heads(keys(tx, queue, failing))
    behind: list[int] = []
    for g, head in heads.first.items():
        if head.lease is None:
            continue
        # The lease's messages follow its first failing one without a gap (a claim takes a
        # consecutive run, and only acks delete within it): stop at the first other one.
        for seq, other in fetch_all(
            tx.conn, sql.GROUP_AFTER, (queue.key, g, head.fseq, BATCH_SPAN)
        ):
            if other != head.lease:
                break
            behind.append(seq)
    return rules.hold_back(retries, dead, heads, behind, acks)


def keys(tx: Tx, queue: QueueRecord, seqs: Sequence[int]) -> list[rules.Failing]:
    """The messages of ``queue`` among ``seqs``: group, place and lease, from their rows."""
    out: list[rules.Failing] = []
    for chunk in chunks(seqs):
        out += map(
            rules.Failing._make,
            fetch_all(tx.conn, sql.FIFO_INFO.format(marks=marks(len(chunk))), (queue.key, *chunk)),
        )
    return out


def release_any(
    tx: Tx, queue: QueueRecord, seqs: Sequence[int], now_ms: int, kind: int | None = None
) -> tuple[int, set[str]]:
    """Leased messages among ``seqs`` (of lease kind ``kind``, or any) made ready now, the
    attempt given back: how many, and their groups, for the caller to refresh."""
    n = 0
    groups: set[str] = set()
    for f in keys(tx, queue, seqs):
        if f.group is None or f.lease is None:
            continue
        cur = tx.conn.execute(sql.RELEASE_ORDER, (now_ms, kind, queue.key, f.group, f.fseq))
        if cur.rowcount > 0:
            n += cur.rowcount
            groups.add(f.group)
    return n, groups


def move(tx: Tx, queue: QueueRecord, seqs: Sequence[int], dlq: QueueRecord, now_ms: int) -> int:
    """Dead-letter FIFO messages into the FIFO queue ``dlq``, in sequence order, each under
    the dead-letter queue's next sequence number; their groups come along."""
    conn = tx.conn
    row = fetch_one(conn, sql.FIFO_LAST_SEQ, (dlq.key,))
    if row is None:
        return 0
    last: int = row[0]
    info = keys(tx, queue, seqs)
    info.sort(key=lambda r: (r[2] or 0, r[0]))
    moved = 0
    size = 0
    oldest: int | None = None
    newest = 0
    groups: set[str] = set()
    if not info:
        return 0
    # Appended to the dead-letter queue's band; the rows here die with their order rows.
    base = layout.take(tx, dlq.key, len(info))
    for i, (seq, g, f, _l) in enumerate(info):
        last += 1
        new = base + i
        ask = {
            "new": new,
            "dlq": dlq.key,
            "now": now_ms,
            "fseq": last,
            "seq": seq,
            "src": queue.key,
        }
        got = fetch_one(conn, sql.MOVE_FIFO, ask)
        if got is None:
            continue
        if g is not None:
            conn.execute(sql.DELETE_ORDER, (queue.key, g, f))
        else:
            conn.execute(sql.DELETE_SEQS.format(marks="?"), (queue.key, seq))
        if got[2] is not None:
            conn.execute(sql.insert_order(1), (dlq.key, got[2], last, new, now_ms))
        moved += 1
        size += got[0]
        oldest = got[1] if oldest is None else min(oldest, got[1])
        newest = max(newest, got[1])
        if got[2] is not None:
            groups.add(got[2])
    if moved:
        assert oldest is not None
        conn.execute(sql.FIFO_SET_SEQ, (last, dlq.key))
        conn.execute(sql.RAISE_FLOOR, (newest, dlq.key))  # moved in: late, and sent before
        tx.removed(queue.key, moved, size)
        tx.added(dlq.key, moved, size, oldest)
        refresh(tx, dlq.key, groups)
    return moved


def delete(tx: Tx, queue: QueueRecord, seqs: Sequence[int]) -> tuple[int, int, set[str]]:
    """Messages of a FIFO queue taken out (acks, deletes, retention): their order rows go,
    their rows die and wait for the cut (a row outside any group goes now). How many, their
    size, and their groups, for the caller to refresh."""
    groups: set[str] = set()
    seqs, n, size = _delete_delivered(tx, queue.key, seqs, groups)
    for chunk in chunks(seqs):
        rows = fetch_all(
            tx.conn, sql.FIFO_LIVE.format(marks=marks(len(chunk))), (queue.key, *chunk)
        )
        tx.conn.executemany(
            sql.DELETE_ORDER, ((queue.key, g, f) for _, g, f, _ in rows if g is not None)
        )
        loose = [seq for seq, g, _, _ in rows if g is None]
        if loose:
            tx.conn.execute(sql.DELETE_SEQS.format(marks=marks(len(loose))), (queue.key, *loose))
        n += len(rows)
        size += sum(r[3] for r in rows)
        groups.update(g for _, g, _, _ in rows if g is not None)
    return n, size, groups


def _delete_delivered(
    tx: Tx, key: int, seqs: Sequence[int], groups: set[str]
) -> tuple[list[int], int, int]:
    """Delete the order rows of the messages among ``seqs`` that the writer has delivered
    (``Delivered``) without reading their rows: the seqs left to look up, how many were
    deleted and their size. A seq whose order row no longer names it (acked already, its
    lease lapsed and its group compacted) deletes nothing, as a lookup of it would."""
    known = tx.delivered.of
    left: list[int] = []
    facts: list[tuple[int, str, int, int, Run]] = []
    acked: dict[tuple[str, Run], int] = {}  # a claim's run of a group: how many of it acked
    for seq in dict.fromkeys(seqs):
        fact = known.pop(seq, None)
        if fact is None:
            left.append(seq)
        else:
            facts.append((seq, *fact))
            acked[fact[0], fact[3]] = acked.get((fact[0], fact[3]), 0) + 1
    if not facts:
        return left, 0, 0
    # A run acked whole goes in one range: the rows of its group between its first and last
    # sequence numbers were its own when claimed, no other can come between (sequence
    # numbers only grow) and one compacted since has a seq past its top, so finding all n
    # of them there is finding these. Any other message goes one order row at a time.
    whole = {(g, run) for (g, run), n in acked.items() if n == run.n}
    conn = tx.conn
    conn.execute("SAVEPOINT delivered")
    deleted = 0
    if whole:
        deleted += conn.executemany(
            sql.DELETE_ORDER_RUN, ((key, g, run.lo, run.hi, run.top) for g, run in whole)
        ).rowcount
    if len(whole) < len(acked):
        deleted += conn.executemany(
            sql.DELETE_ORDER_OF,
            ((key, g, f, seq) for seq, g, f, _, run in facts if (g, run) not in whole),
        ).rowcount
    if deleted != len(facts):  # some were gone already: which, their rows say
        conn.execute("ROLLBACK TO delivered")
        conn.execute("RELEASE delivered")
        return left + [fact[0] for fact in facts], 0, 0
    conn.execute("RELEASE delivered")
    groups.update(fact[1] for fact in facts)
    return left, len(facts), sum(fact[3] for fact in facts)


def forget(tx: Tx, queue: QueueRecord, seqs: Sequence[int]) -> set[str]:
    """Messages leaving a FIFO queue for a standard one lose their order rows; their
    groups, for the caller to refresh."""
    groups: set[str] = set()
    for f in keys(tx, queue, seqs):
        if f.group is not None:
            tx.conn.execute(sql.DELETE_ORDER, (queue.key, f.group, f.fseq))
            groups.add(f.group)
    return groups


def purge(tx: Tx, key: int) -> None:
    tx.conn.execute(sql.ORDER_CLEAR, (key,))
    tx.conn.execute(sql.GROUPS_CLEAR, (key,))
    tx.conn.execute(sql.DEDUP_CLEAR, (key,))


def prune_dedup(tx: Tx, now_ms: int, limit: int) -> int:
    """Forget the deduplication ids past their window among the ``limit`` stored first; how
    many. Ids are stored in the order of their send times and every window is as long, so
    the front of the table is where windows close, without an index of their ends to keep
    at every send. An id still in its window there (stored again over its expired row,
    which keeps its place, or sent before the wall clock stepped back) stays, and the ones
    behind it in the slice go; a caller prunes until a slice has nothing to forget."""
    cur = tx.conn.execute(sql.DEDUP_PRUNE, (now_ms, limit))
    return max(cur.rowcount, 0)
