"""Standard queues on SQLite as a log: a message row is written once and deleted once.

A queue owns the seqs ``queue << 40`` up to the next queue's. Its *ready band* (bit 39
clear) holds the messages in delivery order; the queue's cursor (``cursors.next``) is the
first one not claimed yet. A claim takes the run from the cursor and writes one lease row
(``leases``: its run ``[lo, hi]``, deadline, kind, claim time) instead of updating each
message: a message under a lease has had one more attempt than its row says. An ack
deletes rows. Everything else is an append: a retry, a delay that ends, a lease that lapses
or is handed back put the message at the tail of the ready band under a new seq (attempts
carried) and delete the old row. Messages that wait are *held* (``held``: until when, with
which attempts): delayed sends in the *delayed band* (bit 39 set), retried or longer-leased
messages where they are, keeping their seq (and so the lease ids that name them) until
they are due.

Every function runs inside one writer transaction (``Tx``); the rules themselves
(attempts, dead letters) are ``ocd.store.rules``'.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ocd.store.sqlite import sql
from ocd.store.sqlite.ops import Op, Tx, fetch_all, fetch_one
from ocd.store.values import NewMessage, QueueRecord

SPAN = 1 << 40  # seqs a queue owns
DELAYED = 1 << 39  # the delayed band's offset in them
ROWS = 32  # messages per INSERT statement (ten parameters each)
PROMOTE_BATCH = 1000


def seq_of(queue: int, n: int) -> int:
    """The ``n``-th seq of a queue's ready band (FIFO queues: its ``n``-th message)."""
    return queue * SPAN + n


def band(queue: int) -> tuple[int, int]:
    """A queue's ready band, [start, end)."""
    return queue * SPAN, queue * SPAN + DELAYED


def take(tx: Tx, queue: int, n: int, delayed: bool = False) -> int:
    """Reserve ``n`` new seqs at the tail of a band; the first of them. Seqs are never
    reused, so a stale lease id never names another message."""
    statement = sql.TAKE_DELAYED_SEQS if delayed else sql.TAKE_SEQS
    row = fetch_one(tx.conn, statement, (n, queue))
    if row is None:
        tx.conn.execute(sql.NEW_CURSOR, (queue, queue * SPAN))
        row = fetch_one(tx.conn, statement, (n, queue))
    return queue * SPAN + (DELAYED if delayed else 0) + int(row[0]) - n


def take_sent(tx: Tx, queue: int, n: int, top_ms: int) -> tuple[int, int]:
    """``take`` for a send of ``n`` messages to the ready band, the latest sent at
    ``top_ms``: the first seq, and the floor before (rows sent before it are late)."""
    row = fetch_one(tx.conn, sql.TAKE_SENT_SEQS, (n, top_ms, queue))
    if row is None:
        tx.conn.execute(sql.NEW_CURSOR, (queue, queue * SPAN))
        row = fetch_one(tx.conn, sql.TAKE_SENT_SEQS, (n, top_ms, queue))
    tail, floor = row
    return queue * SPAN + int(tail) - n, int(floor)


def cursor(tx: Tx, queue: int) -> int:
    row = fetch_one(tx.conn, sql.CURSOR, (queue,))
    return int(row[0]) if row is not None else queue * SPAN


def rows(tx: Tx, queue: QueueRecord, messages: Sequence[NewMessage]) -> list[tuple[Any, ...]]:
    """Sends: seqs at the tail of the ready band for ready ones, in the delayed band for
    delayed ones (visible after their send time), held until due; the rows to insert. A
    ready row is in order (not late) if it was sent no earlier than every row sent before
    it to the band: the cursor row's floor, then the batch's own. Delayed ones raise the
    floor too: they come to the band later, sent before what is sent meanwhile.

    A send whose messages are all plain (visible at their send, in order, no attributes:
    nearly every send) is inserted here, by ``insert_plain``, and has no rows to return."""
    key = queue.key
    ready = [m for m in messages if m.visible_ms <= m.sent_ms]
    top = max(m.sent_ms for m in messages)
    out: list[tuple[Any, ...]] = []
    if ready:
        first, floor = take_sent(tx, key, len(ready), top)
        if len(ready) == len(messages) and _plain(messages, floor):
            insert_plain(tx, key, first, messages)
            return out
        for i, m in enumerate(ready):
            late = 1  # an int, not a bool: ops.py
            if m.sent_ms >= floor:
                floor = m.sent_ms
                late = 0
            out.append(
                (first + i, key, m.id, m.content_type, m.body, len(m.body), m.sent_ms,
                 m.visible_ms, m.attrs, late)
            )  # fmt: skip
    if len(ready) < len(messages):
        waiting = [m for m in messages if m.visible_ms > m.sent_ms]
        first = take(tx, key, len(waiting), delayed=True)
        held = [
            (first + i, key, m.id, m.content_type, m.body, len(m.body), m.sent_ms, m.visible_ms,
             m.attrs, True)
            for i, m in enumerate(waiting)
        ]  # fmt: skip
        tx.conn.executemany(sql.HOLD_NEW, ((r[0], key, r[7]) for r in held))
        if not ready:
            tx.conn.execute(sql.RAISE_FLOOR, (top, key))
        out += held
    return out


def send_rows(tx: Tx, sends: Sequence[Enqueue]) -> list[tuple[Any, ...]]:
    """``rows`` of a group's sends, in order. Consecutive sends to one queue whose messages
    are all visible at once and without attributes go together, as one send would: one
    reservation of seqs and as few INSERTs as their messages need, where single ``send()``
    calls sharing a commit each paid two statements."""
    out: list[tuple[Any, ...]] = []
    run: list[Enqueue] = []

    def flush() -> None:
        if run:
            out.extend(rows(tx, run[0].queue, [m for e in run for m in e.messages]))
            run.clear()

    for e in sends:
        together = all(m.visible_ms <= m.sent_ms and m.attrs is None for m in e.messages)
        if run and (not together or e.queue.key != run[0].queue.key):
            flush()
        if together:
            run.append(e)
        else:
            out += e.rows(tx)
    flush()
    return out


def _plain(messages: Sequence[NewMessage], floor: int) -> bool:
    """Whether every message is visible at its send, sent no earlier than the one before it
    (and than ``floor``), and has no attributes."""
    for m in messages:
        sent = m.sent_ms
        if sent < floor or m.visible_ms != sent or m.attrs is not None:
            return False
        floor = sent
    return True


def insert_plain(tx: Tx, queue: int, first: int, messages: Sequence[NewMessage]) -> None:
    """INSERT plain messages (``_plain``) under consecutive seqs from ``first``."""
    for i in range(0, len(messages), ROWS):
        part = messages[i : i + ROWS]
        params: list[Any] = [queue, first + i]
        for m in part:
            params += m[:4]  # id, content type, body, send time
        tx.conn.execute(sql.insert_plain(len(part)), params)


class Enqueue(Op):
    """A send to a standard queue. The writer puts the rows of all the sends of a group
    in as few statements as it can (``insert``): the point of group commit."""

    grows = True

    def __init__(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> None:
        super().__init__()
        self.queue = queue
        self.messages = messages
        self.most_rows = len(messages)

    def rows(self, tx: Tx) -> list[tuple[Any, ...]]:
        return rows(tx, self.queue, self.messages)

    def account(self, tx: Tx) -> None:
        # Plain loops, not sum() and min() over generators: this runs for every send.
        size = 0
        first = None
        for m in self.messages:
            size += len(m.body)
            if first is None or m.sent_ms < first:
                first = m.sent_ms
        if first is not None:
            tx.added(self.queue.key, len(self.messages), size, first)

    def apply(self, tx: Tx) -> None:
        insert(tx, self.rows(tx))
        self.account(tx)


def insert(tx: Tx, rows: list[tuple[Any, ...]]) -> None:
    """INSERT rows (``rows``' shape) with as few statements as possible: one statement of
    many rows costs SQLite less than ``executemany`` of one row each."""
    full = len(rows) - len(rows) % ROWS
    if full:
        tx.conn.executemany(
            sql.insert_log(ROWS),
            ([v for r in rows[i : i + ROWS] for v in r] for i in range(0, full, ROWS)),
        )
    if full < len(rows):
        tx.conn.execute(sql.insert_log(len(rows) - full), [v for r in rows[full:] for v in r])


def reappend(
    tx: Tx,
    source: int,
    seqs: Sequence[int],
    visible_ms: int,
    *,
    add: int = 0,
    first_ms: int | None = None,
    dest: int | None = None,
) -> tuple[int, int, int | None]:
    """Append messages of ``source`` anew at the tail of ``dest``'s ready band (the same
    queue by default), in the order given, and delete the old rows (and any held rows of
    them): ``add`` attempts counted and ``first_ms`` the first receive time where there
    was none; a move to another queue starts both again. (count, bytes, oldest sent)."""
    if not seqs:
        return 0, 0, None
    to = source if dest is None else dest
    encoded = json.dumps(list(seqs))
    base = take(tx, to, len(seqs))
    rows = fetch_all(
        tx.conn,
        sql.REAPPEND,
        {
            "base": base,
            "dest": to,
            "vis": visible_ms,
            "reset": to != source,
            "add": add,
            "first": first_ms,
            "seqs": encoded,
            "src": source,
        },
    )
    tx.conn.execute(sql.DELETE_LOG_SEQS, {"seqs": encoded, "src": source})
    tx.conn.execute(sql.DELETE_HELD_SEQS, (encoded,))
    tx.notify.add(to)
    if to != source and rows:  # moved in: sent, perhaps, after the queue's own sends
        tx.conn.execute(sql.RAISE_FLOOR, (max(r[1] for r in rows), to))
    size = sum(r[0] for r in rows)
    return len(rows), size, min((r[1] for r in rows), default=None)


def promote(tx: Tx, queue: int, now_ms: int) -> int:
    """Append the held messages that are due to the ready band (a delay ended, a retry's
    wait or a longer visibility ran out)."""
    total = 0
    while True:
        seqs = [r[0] for r in fetch_all(tx.conn, sql.DUE_HELD, (queue, now_ms, PROMOTE_BATCH))]
        if not seqs:
            return total
        encoded = json.dumps(seqs)
        base = take(tx, queue, len(seqs))
        tx.conn.execute(sql.PROMOTE_HELD, {"base": base, "seqs": encoded})
        tx.conn.execute(sql.DELETE_LOG_SEQS, {"seqs": encoded, "src": queue})
        tx.conn.execute(sql.DELETE_HELD_SEQS, (encoded,))
        tx.notify.add(queue)
        total += len(seqs)
        if len(seqs) < PROMOTE_BATCH:
            return total


def _end_lease(
    tx: Tx, lease: int, queue: int, lo: int, hi: int, claimed_ms: int, visible_ms: int
) -> int:
    """A lease ends with messages still under it: they are appended anew, the attempt
    spent, and the lease dropped."""
    params = {"lo": lo, "hi": hi, "q": queue}
    seqs = [r[0] for r in fetch_all(tx.conn, sql.LEASE_SURVIVORS, params)]
    n = reappend(tx, queue, seqs, visible_ms, add=1, first_ms=claimed_ms)[0]
    tx.conn.execute(sql.DELETE_LEASE, (lease,))
    return n


def lapse(tx: Tx, queue: int, now_ms: int) -> int:
    """Leases whose deadline has passed: their messages are appended anew, the attempt
    spent, and the leases dropped."""
    total = 0
    while True:
        leases = fetch_all(tx.conn, sql.LAPSED_LEASES, (queue, now_ms, 100))
        for lease, lo, hi, claimed_ms, deadline_ms in leases:
            total += _end_lease(tx, lease, queue, lo, hi, claimed_ms, deadline_ms)
        if len(leases) < 100:
            return total


def hand_back(tx: Tx, kind: int, now_ms: int) -> int:
    """Every lease of ``kind`` ends now, its messages appended anew with their attempt
    counted (a crashed daemon's push leases: a message that crashes it cannot loop for
    ever)."""
    total = 0
    for lease, queue, lo, hi, claimed_ms in fetch_all(tx.conn, sql.LEASES_OF_KIND, (kind,)):
        total += _end_lease(tx, lease, queue, lo, hi, claimed_ms, now_ms)
    return total


def drop_empty_leases(tx: Tx, queue: int, seqs: Sequence[int]) -> None:
    """After messages of a queue were settled: the leases left with none are dropped."""
    if seqs:
        tx.conn.execute(sql.DROP_EMPTY_LEASES, {"q": queue, "min": min(seqs), "max": max(seqs)})


def removed(tx: Tx, queue: int, seqs: Sequence[int]) -> None:
    """Messages of a queue were deleted or moved away: they leave no held rows behind,
    and the leases they emptied are dropped."""
    if seqs and fetch_one(tx.conn, sql.ANY_HELD, (queue,)) is not None:
        tx.conn.execute(sql.DELETE_HELD_SEQS, (json.dumps(list(seqs)),))
    drop_empty_leases(tx, queue, seqs)


def clear(tx: Tx, queue: int) -> None:
    """A purge: no lease or held row of the queue is left (its messages are gone)."""
    tx.conn.execute(sql.DELETE_QUEUE_LEASES, (queue,))
    tx.conn.execute(sql.DELETE_QUEUE_HELD, (queue,))
