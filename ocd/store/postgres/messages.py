"""Messages on PostgreSQL: send, claim, settle, release, expire, purge, peek and counts.

Sends go through the group-committing writer (``writer.py``); everything else runs on a
pool connection, in a transaction of its own.
"""

from __future__ import annotations

import dataclasses
import random
import secrets
from collections.abc import Sequence
from typing import Any

import asyncpg

from ocd.errors import QueueNotFound, StoreError, StoreFull, StoreUnavailable
from ocd.store import rules
from ocd.store.postgres import fifo, fifo_sql, sql
from ocd.store.postgres.core import PostgresCore, _rowcount
from ocd.store.postgres.writer import SHARDS
from ocd.store.rows import claimed, fifo_claimed
from ocd.store.values import (
    Backlog,
    Claim,
    Claimed,
    DeadLetter,
    Delivery,
    Expired,
    FifoSent,
    LeaseKind,
    NewMessage,
    NotReady,
    QueueRecord,
    Ready,
    Retry,
    Settled,
)

CHUNK = 5000  # rows per retention or purge statement


class PostgresMessages(PostgresCore):
    # ---------------------------------------------------------------- messages

    async def enqueue(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> Backlog:
        if self._writer is None or self._closing:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if queue.fifo:
            fifo_backlog, _ = await self.enqueue_fifo(queue, messages)
            return fifo_backlog
        try:
            backlog: Backlog = await self._writer.submit(queue, messages)
        except StoreUnavailable:
            self._mark_down()
            raise
        except StoreFull as e:
            self._mark_full(e)
            raise
        self._sent()
        return backlog

    async def enqueue_fifo(
        self, queue: QueueRecord, messages: Sequence[NewMessage]
    ) -> tuple[Backlog, list[FifoSent]]:
        if self._writer is None or self._closing:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        try:
            result: tuple[Backlog, list[FifoSent]] = await self._writer.submit(queue, messages)
        except StoreUnavailable:
            self._mark_down()
            raise
        except StoreFull as e:
            self._mark_full(e)
            raise
        self._sent()
        return result

    async def ready(self, queue: QueueRecord, now_ms: int, limit: int) -> Ready:
        async with self._db("read") as c:
            if queue.fifo:
                count, first, nxt = await c.fetchrow(fifo_sql.READY_FIFO, queue.key, now_ms, limit)
                return Ready(count, first, nxt)
            count, at_cursor, held, lapsed, held_next, lease_next = await c.fetchrow(
                sql.READY, queue.key, now_ms, limit
            )
        firsts = [t for t in (at_cursor, held, lapsed) if t is not None]
        nexts = [t for t in (held_next, lease_next) if t is not None]
        return Ready(min(count, limit), min(firsts, default=None), min(nexts, default=None))

    async def claim(self, queue: QueueRecord, ask: Claim) -> Claimed:
        lease = secrets.randbits(62) + 1
        owner = self.node_id if ask.kind == LeaseKind.PUSH else None
        args = (queue.key, ask.now_ms, ask.limit, ask.lease_until_ms, lease, int(ask.kind), owner)
        try:
            return await self._claim(
                queue, args, ask.max_attempts, ask.dead_letter, ask.max_batches
            )
        except StoreUnavailable:
            if owner is not None:  # it may have committed before the connection went
                self._doubtful.add(lease)
            raise

    async def _claim(
        self,
        queue: QueueRecord,
        args: tuple[Any, ...],
        max_attempts: int,
        dead_letter: DeadLetter,
        max_batches: int | None,
    ) -> Claimed:
        lease = args[4]
        now_ms = args[1]
        if queue.fifo:
            return await self._claim_fifo(queue, args, max_attempts, dead_letter, max_batches)
        async with self._db("write", queue) as c:
            if max_batches is None:
                rows = await c.fetch(sql.CLAIM, *args)  # one statement, one round trip
            else:
                async with c.transaction():
                    # one capped claim of this queue at a time, deployment-wide
                    await c.execute(sql.XACT_LOCK, sql.CLAIM_LOCK, queue.key)
                    held = await c.fetchval(sql.PUSH_LEASES_HELD, queue.key, now_ms)
                    if held >= max_batches:
                        return Claimed([])
                    rows = await c.fetch(sql.CLAIM, *args)
            split = claimed(rows, lease, max_attempts)
            if split.spent:
                # Leased to us by the claim, so no one else can touch them meanwhile; the
                # lease goes with them if they were all it had.
                async with c.transaction():
                    await self._dead_letter(c, queue, split.spent, dead_letter, now_ms)
        return Claimed(split.deliveries, split.exhausted)

    async def _claim_fifo(
        self,
        queue: QueueRecord,
        args: tuple[Any, ...],
        max_attempts: int,
        dead_letter: DeadLetter,
        max_batches: int | None,
    ) -> Claimed:
        key, now_ms, limit, until_ms, lease, kind, owner = args
        async with self._db("write", queue) as c:
            if max_batches is None:  # one statement: ocd_fifo_claim takes the lock itself
                rows = await fifo.claim(c, queue, limit, now_ms, until_ms, lease, kind, owner)
            else:
                async with c.transaction():
                    await fifo.lock(c, key)
                    held = await c.fetchval(sql.FIFO_PUSH_LEASES_HELD, key, now_ms)
                    if held >= max_batches:
                        return Claimed([])
                    rows = await fifo.claim(c, queue, limit, now_ms, until_ms, lease, kind, owner)
            split = fifo_claimed(rows, lease, max_attempts)
            if split.spent:  # leased to us by the claim: no one else touches them meanwhile
                async with c.transaction():
                    locks = [key]
                    to = rules.destination(queue, dead_letter, self.catalogue.knows)
                    if to is rules.Destination.MOVE_FIFO:
                        assert dead_letter.queue is not None
                        locks.append(dead_letter.queue.key)
                    await fifo.lock(c, *locks)
                    await self._dead_letter(c, queue, split.spent, dead_letter, now_ms)
                    await fifo.refresh(c, key, split.groups)
        return Claimed(split.deliveries, split.exhausted)

    async def _settle_fifo(
        self,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        dlq = dead_letter.queue
        locks = [queue.key]
        if dead and dlq is not None and dlq.fifo and self.catalogue.knows(dlq.key):
            locks.append(dlq.key)
        retried = moved = deleted = 0
        if not retries and not dead:  # the common case: one statement, one round trip
            async with self._db("write", queue) as c:
                acked = await c.fetchval(
                    fifo_sql.FIFO_ACK, queue.key, list(acks), random.randrange(SHARDS)
                )
            self.catalogue.took(queue.key, acked)
            return Settled(acked, 0, 0, 0)
        async with self._db("write", queue) as c, c.transaction():
            await fifo.lock(c, *locks)
            touched = await fifo.delete(c, queue, acks)
            acked = len(touched)
            held = await fifo.hold_back(c, queue, acks, retries, dead)
            if held.retries:
                status = await c.execute(
                    sql.RETRY,
                    queue.key,
                    [r.seq for r in held.retries],
                    [r.visible_ms for r in held.retries],
                )
                retried = _rowcount(status)
            if held.back:
                await c.execute(fifo_sql.RELEASE_ANY, queue.key, now_ms, held.back)
            moved, deleted = await self._dead_letter(c, queue, held.dead, dead_letter, now_ms)
            await fifo.refresh(c, queue.key, held.groups.union(touched))
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        if acked or deleted or moved:
            gone = acked + deleted + moved
            self.catalogue.took(queue.key, gone)
        return Settled(acked, retried, moved, deleted)

    async def settle(
        self,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        if queue.fifo:
            return await self._settle_fifo(queue, acks, retries, dead, dead_letter, now_ms)
        shard = random.randrange(SHARDS)
        acked = retried = 0
        if not retries and not dead:  # the common case: one statement, one round trip
            async with self._db("write", queue) as c:
                acked = await c.fetchval(sql.ACK, queue.key, list(acks), shard)
            self.catalogue.took(queue.key, acked)
            return Settled(acked, 0, 0, 0)
        async with self._db("write", queue) as c, c.transaction():
            # The dead-letter queue's tail first (the one lock a settle takes beyond rows):
            # a settle never takes its own queue's tail, so two queues dead-lettering into
            # each other cannot wait on each other.
            moved, deleted = await self._dead_letter(c, queue, dead, dead_letter, now_ms)
            if acks:
                acked = await c.fetchval(sql.DELETE_SEQS, queue.key, list(acks), shard)
                await self._removed(c, queue, acks)
            if retries:
                # held apart, then appended by the next claim once due
                seqs = [r.seq for r in retries]
                status = await c.execute(
                    sql.HOLD, queue.key, seqs, now_ms, [r.visible_ms for r in retries]
                )
                retried = _rowcount(status)
                await c.execute(sql.DROP_EMPTY_LEASES, queue.key, min(seqs), max(seqs))
            # Retried messages may be ready, and a lease is gone: a capped consumer on
            # another node may start its next batch.
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        if acked:
            self.catalogue.took(queue.key, acked)
        return Settled(acked, retried, moved, deleted)

    async def release(
        self,
        queue: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
        kind: LeaseKind = LeaseKind.PUSH,
    ) -> int:
        if not queue.fifo:
            async with self._db("write", queue) as c, c.transaction():
                n: int = await c.fetchval(sql.RELEASE_LOG, queue.key, list(seqs), now_ms, int(kind))
                if seqs:
                    await c.execute(sql.DROP_EMPTY_LEASES, queue.key, min(seqs), max(seqs))
                await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
            self.catalogue.notify(queue.key)
            return n
        async with self._db("write", queue) as c, c.transaction():
            await fifo.lock(c, queue.key)
            rows = await c.fetch(sql.RELEASE_SEQS, queue.key, now_ms, int(kind), list(seqs))
            await fifo.refresh(c, queue.key, (r[0] for r in rows))
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        self.catalogue.notify(queue.key)
        return len(rows)

    async def expire(self, now_ms: int) -> list[Expired]:
        expired: list[Expired] = []
        async with self._db("read") as c:
            due = {r[0] for r in await c.fetch(sql.EXPIRABLE, now_ms)}
        for queue in self.catalogue.queues():
            if queue.key not in due:
                continue
            cutoff = now_ms - queue.settings.message_retention_period_s * 1000
            total: int = 0
            while True:
                async with self._db("write", queue) as c:
                    if queue.fifo:
                        n = await self._expire_fifo(c, queue, cutoff)
                    else:
                        n = await self._expire_log(c, queue, cutoff)
                total += n
                if n < CHUNK:
                    break
            if total:
                expired.append(Expired(queue.account, queue.name, total))
        while True:
            async with self._db("write") as c:
                status = await c.execute(fifo_sql.DEDUP_PRUNE, now_ms, CHUNK)
            if _rowcount(status) < CHUNK:
                break
        return expired

    async def _expire_log(self, c: asyncpg.Connection, queue: QueueRecord, cutoff: int) -> int:
        async with c.transaction():
            n, lo, hi = await c.fetchrow(
                sql.EXPIRE_LOG, queue.key, cutoff, CHUNK, random.randrange(SHARDS)
            )
            if n:
                await c.execute(sql.DROP_EMPTY_LEASES, queue.key, lo, hi)
        return int(n)

    async def _expire_fifo(self, c: asyncpg.Connection, queue: QueueRecord, cutoff: int) -> int:
        async with c.transaction():
            await fifo.lock(c, queue.key)
            rows = await c.fetch(
                fifo_sql.FIFO_EXPIRE, queue.key, cutoff, CHUNK, random.randrange(SHARDS)
            )
            await fifo.refresh(c, queue.key, (r[0] for r in rows))
        return len(rows)

    async def purge(self, queue: QueueRecord, now_ms: int) -> int:
        if queue.fifo:
            total = await self._purge_fifo(queue)
        else:
            total = await self._purge_log(queue)
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            if queue.fifo:  # the groups of what was sent since the purge began, and no ids
                await fifo.lock(c, queue.key)
                await c.execute(fifo_sql.DEDUP_CLEAR, queue.key)
                await c.execute(fifo_sql.GROUPS_CLEAR, queue.key)
                await c.execute(fifo_sql.GROUPS_REBUILD, queue.key)
            await c.execute(sql.MARK_PURGED, now_ms, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        current = self.catalogue.by_key(queue.key)
        if current is not None:
            self.catalogue.remember(dataclasses.replace(current, purged_ms=now_ms))
        return total

    async def _purge_fifo(self, queue: QueueRecord) -> int:
        async with self._db("write", queue) as c:
            last = await c.fetchval(sql.LAST_SEQ, queue.key)
        return await self._purge_chunks(queue, sql.PURGE_CHUNK, last)

    async def _purge_log(self, queue: QueueRecord) -> int:
        """Every message of the queue but those its bands gave after the purge began."""
        async with self._db("write", queue) as c:
            bounds = await c.fetchrow(sql.PURGE_BOUNDS, queue.key)
        tail, dtail = bounds if bounds is not None else (0, 0)
        ready_end = queue.key * sql.SPAN + tail
        delayed_end = queue.key * sql.SPAN + sql.DELAYED + dtail
        total = await self._purge_chunks(queue, sql.PURGE_LOG_CHUNK, ready_end, delayed_end)
        async with self._db("write", queue) as c:
            await c.execute(sql.PURGE_LEASES, queue.key, ready_end)
        return total

    async def _purge_chunks(self, queue: QueueRecord, statement: str, *bounds: int) -> int:
        """Run a purge statement (queue, bounds, chunk, shard) until a chunk falls short."""
        total: int = 0
        while True:
            async with self._db("write", queue) as c, c.transaction():
                await self._durable(c)
                n = await c.fetchval(statement, queue.key, *bounds, CHUNK, random.randrange(SHARDS))
            total += n
            if n < CHUNK:
                return total

    async def peek(self, queue: QueueRecord, now_ms: int, limit: int) -> list[Delivery]:
        async with self._db("read") as c:
            rows = await c.fetch(sql.PEEK if queue.fifo else sql.PEEK_LOG, queue.key, now_ms, limit)
        return [
            Delivery(seq, mid, ct, body, sent, att, 0, grp, fseq, dedup, attrs)
            for seq, mid, ct, body, sent, att, grp, fseq, dedup, attrs in rows
        ]

    async def delete_messages(self, queue: QueueRecord, seqs: Sequence[int]) -> int:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            return await self._delete(c, queue, seqs)

    async def backlog(self, queue: QueueRecord) -> Backlog:
        async with self._db("read") as c:
            count, size, oldest = await c.fetchrow(sql.BACKLOG, queue.key)
        self.catalogue.set_count(queue.key, int(count))
        return Backlog(int(count), int(size), oldest or 0)

    async def queue_stats(self, now_ms: int) -> dict[int, NotReady]:
        out: dict[int, NotReady] = {}
        async with self._db("read") as c:
            # the dashboard watches: every node's sends and acks in its counts, not only
            # this node's since the catalogue's last reload
            for key, count in await c.fetch(sql.ALL_COUNTS):
                self.catalogue.set_count(key, int(count))
            for q in self.catalogue.queues():
                if q.fifo:
                    statement = sql.NOT_READY_ALL if q.settings.delivery_delay_s else sql.NOT_READY
                    not_ready, leased = await c.fetchrow(statement, q.key, now_ms)
                else:
                    held, leased = await c.fetchrow(sql.NOT_READY_LOG, q.key, now_ms)
                    not_ready = held + leased
                out[q.key] = NotReady(not_ready, leased)
        return out
