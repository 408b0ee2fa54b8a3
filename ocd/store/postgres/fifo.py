"""FIFO queues on PostgreSQL: the same rules as SQLite's ``fifo.py``, serialised per queue.

Every transaction that changes a FIFO queue's messages first takes the queue's advisory
lock (``fifo_sql.FIFO_LOCK``). Under it the statements of one transaction see everything the
previous holder committed, so group rows, sequence numbers and deduplication ids need no
finer locking, and no two claims, on any nodes, can lease one group. Claims and group
refreshes run server-side (``ocd_fifo_claim``, ``ocd_fifo_refresh``), one round trip each.
The functions here run on a connection inside such a transaction.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from ocd.errors import QueueNotFound
from ocd.store.postgres import fifo_sql, sql
from ocd.store.values import DEDUP_WINDOW_MS, FifoSent, NewMessage, QueueRecord, Retry

SHARDS = 8


async def lock(c: asyncpg.Connection, *keys: int) -> None:
    """Hold the FIFO lock of each queue for the transaction, in key order (no deadlocks)."""
    for key in sorted(set(keys)):
        await c.execute(sql.XACT_LOCK, fifo_sql.FIFO_LOCK, key)


async def enqueue(
    c: asyncpg.Connection, queue: QueueRecord, messages: Sequence[NewMessage]
) -> tuple[list[FifoSent], int]:
    """Store the messages that are not duplicates; (one answer per message, how many
    stored). Duplicates within ``messages`` collapse to the first."""
    last = await c.fetchval(fifo_sql.FIFO_LAST_SEQ, queue.key)
    if last is None:
        raise QueueNotFound(queue.name)
    by_group = queue.settings.deduplication_scope == "message_group"
    now = min(m.sent_ms for m in messages)
    first: dict[tuple[str, str], FifoSent] = {}  # each id's first message here
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [], [], [], [], [], [])
    for m in messages:
        key = ((m.group or "") if by_group else "", m.dedup or "")
        if key in first:
            continue
        last += 1
        first[key] = FifoSent(m.id, last, False)
        for col, value in zip(
            cols,
            (
                m.id,
                m.content_type,
                m.body,
                len(m.body),
                m.sent_ms,
                m.visible_ms,
                m.group,
                m.dedup,
                last,
                key[0],
                m.sent_ms + DEDUP_WINDOW_MS,
                m.attrs,
            ),
            strict=False,
        ):
            col.append(value)
    rows = await c.fetch(
        fifo_sql.FIFO_ENQUEUE,
        queue.key,
        *cols[:9],
        cols[9],
        now,
        cols[10],
        random.randrange(SHARDS),
        last,
        cols[11],
    )
    taken = {r[0] for r in rows}
    earlier: dict[tuple[str, str], FifoSent] = {}
    missed = [k for k, s in first.items() if s.sequence not in taken]
    if missed:  # duplicates of messages sent before: answer with those
        found = await c.fetch(
            fifo_sql.DEDUP_FIND, queue.key, [k[0] for k in missed], [k[1] for k in missed]
        )
        earlier = {(r[0], r[1]): FifoSent(r[2], r[3], True) for r in found}
    out: list[FifoSent] = []
    for m in messages:
        key = ((m.group or "") if by_group else "", m.dedup or "")
        s = first[key]
        if s.sequence not in taken:
            out.append(earlier[key])
        elif s.id == m.id:
            out.append(s)
        else:
            out.append(FifoSent(s.id, s.sequence, True))
    return out, len(taken)


async def claim(
    c: asyncpg.Connection,
    queue: QueueRecord,
    limit: int,
    now_ms: int,
    until_ms: int,
    lease: int,
    kind: int,
    owner: str | None,
) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await c.fetch(
        fifo_sql.FIFO_CLAIM, queue.key, now_ms, limit, until_ms, lease, kind, owner
    )
    return rows


async def refresh(c: asyncpg.Connection, key: int, groups: Iterable[str | None]) -> None:
    wanted = sorted({g for g in groups if g is not None})
    if wanted:
        await c.execute(fifo_sql.FIFO_REFRESH, key, wanted)


async def hold_back(
    c: asyncpg.Connection,
    queue: QueueRecord,
    acks: Sequence[int],
    retries: Sequence[Retry],
    dead: Sequence[int],
) -> tuple[list[Retry], list[int], list[int], set[str]]:
    """The group rule of a settle, as SQLite's ``hold_back``: per group the first retried or
    dead-lettered message keeps its fate; the later ones of its lease not acked here go
    back with it. Runs after the acks are deleted, so the lease's run has no gaps."""
    failing = [r.seq for r in retries] + list(dead)
    if not failing:
        return list(retries), list(dead), [], set()
    info = await c.fetch(fifo_sql.FIFO_INFO, queue.key, failing)
    first: dict[str, tuple[int, int, int | None]] = {}
    for seq, g, fseq, lease in info:
        if g is None or fseq is None:
            continue
        if g not in first or fseq < first[g][0]:
            first[g] = (fseq, seq, lease)
    back = {seq for seq, g, _f, _l in info if g is not None and first[g][1] != seq}
    leased = [(g, f, lease) for g, (f, _s, lease) in first.items() if lease is not None]
    if leased:
        rows = await c.fetch(
            fifo_sql.FIFO_BEHIND,
            queue.key,
            [x[0] for x in leased],
            [x[1] for x in leased],
            [x[2] for x in leased],
        )
        acked = set(acks)
        back.update(r[0] for r in rows if r[0] not in acked)
    kept_retries = [r for r in retries if r.seq not in back]
    kept_dead = [s for s in dead if s not in back]
    return kept_retries, kept_dead, sorted(back), set(first)


async def delete(c: asyncpg.Connection, queue: QueueRecord, seqs: Sequence[int]) -> list[str]:
    """Delete by seq, keeping the counts; the groups touched (not yet refreshed)."""
    if not seqs:
        return []
    rows = await c.fetch(fifo_sql.FIFO_DELETE_SEQS, queue.key, list(seqs), random.randrange(SHARDS))
    return [r[0] for r in rows]


async def move(
    c: asyncpg.Connection, queue: QueueRecord, seqs: Sequence[int], dlq: QueueRecord, now_ms: int
) -> int:
    """Dead-letter into the FIFO queue ``dlq`` (whose lock the caller holds too)."""
    n: int = await c.fetchval(
        fifo_sql.FIFO_MOVE, queue.key, dlq.key, now_ms, list(seqs), random.randrange(SHARDS)
    )
    return n
