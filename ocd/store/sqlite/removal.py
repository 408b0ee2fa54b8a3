"""Taking messages out of a queue inside the writer's transaction: deletes (acks, bulk
deletes) and dead-letter moves, shared by the messages and moves facets."""

from __future__ import annotations

from collections.abc import Sequence

from ocd.store import rules
from ocd.store.catalogue import Catalogue
from ocd.store.sqlite import fifo, layout, sql
from ocd.store.sqlite.ops import Tx, chunks, fetch_all, fetch_one, marks
from ocd.store.values import DeadLetter, QueueRecord


def delete(tx: Tx, queue: QueueRecord, seqs: Sequence[int], groups: set[str] | None = None) -> int:
    """Delete messages by seq; a FIFO queue's groups are refreshed, or added to
    ``groups`` for the caller to refresh."""
    if queue.fifo:
        n, size, touched = fifo.delete(tx, queue, seqs)
        if n:
            tx.removed(queue.key, n, size)
        if groups is not None:
            groups |= touched
        else:
            fifo.refresh(tx, queue.key, touched)
        return n
    n = 0
    if _is_run(seqs):  # a batch acked whole: one range, not a seek a seq
        run = (queue.key, min(seqs), max(seqs))
        n, size = fetch_one(tx.conn, sql.COUNT_RUN, run)
        if n:
            tx.conn.execute(sql.DELETE_RUN, run)
            tx.removed(queue.key, n, int(size))
    else:
        for c in chunks(seqs):
            rows = fetch_all(tx.conn, sql.DELETE_SEQS.format(marks=marks(len(c))), (queue.key, *c))
            if rows:
                tx.removed(queue.key, len(rows), sum(r[0] for r in rows))
            n += len(rows)
    layout.removed(tx, queue.key, seqs)
    return n


def _is_run(seqs: Sequence[int]) -> bool:
    """Whether ``seqs`` are every seq from their lowest to their highest, each once."""
    return len(seqs) > 1 and max(seqs) - min(seqs) == len(seqs) - 1 == len(set(seqs)) - 1


def dead_letter(
    catalogue: Catalogue,
    tx: Tx,
    queue: QueueRecord,
    seqs: Sequence[int],
    dead_letter: DeadLetter,
    now_ms: int,
    groups: set[str] | None = None,
) -> tuple[int, int]:
    """Move exhausted messages to the dead-letter queue, or delete them. The groups of
    a FIFO queue's messages are the caller's to refresh."""
    if not seqs:
        return 0, 0
    to = rules.destination(queue, dead_letter, catalogue.knows)
    if to is rules.Destination.DELETE:
        return 0, delete(tx, queue, seqs, groups if groups is not None else set())
    dlq = dead_letter.queue
    assert dlq is not None
    if to is rules.Destination.MOVE_FIFO:
        moved = fifo.move(tx, queue, seqs, dlq, now_ms)
        if not queue.fifo:
            layout.removed(tx, queue.key, seqs)
        return moved, 0
    # Into a standard queue: appended to its log, attempts and first receive starting again.
    if queue.fifo:
        left = fifo.forget(tx, queue, seqs)
        if groups is not None:
            groups |= left
        else:
            fifo.refresh(tx, queue.key, left)
    moved, size, oldest = layout.reappend(tx, queue.key, seqs, now_ms, dest=dlq.key)
    if not queue.fifo:
        layout.drop_empty_leases(tx, queue.key, seqs)
    if moved:
        assert oldest is not None
        tx.removed(queue.key, moved, size)
        tx.added(dlq.key, moved, size, oldest)
    return moved, 0
