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
from ocd.store import rules
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
) -> rules.HoldBack:
    """``rules.hold_back`` over this settle's rows. Runs after the acks are deleted, so the
    lease's run has no gaps."""
    failing = rules.failing_seqs(retries, dead)
    if not failing:
        return rules.unchanged(retries, dead)
    info = [rules.Failing(*r) for r in await c.fetch(fifo_sql.FIFO_INFO, queue.key, failing)]
    heads = rules.group_heads(info)
    leased = [h for h in heads.first.values() if h.lease is not None]
    behind: list[int] = []
    if leased:
        rows = await c.fetch(
            fifo_sql.FIFO_BEHIND,
            queue.key,
            [h.group for h in leased],
            [h.fseq for h in leased],
            [h.lease for h in leased],
        )
        behind = [r[0] for r in rows]
    return rules.hold_back(retries, dead, heads, behind, set(acks))


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
