"""The SQLite backend's Messages facet: sends, claims, settles, releases, expiry, purges."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import sqlite3
from collections.abc import Sequence

from ocd.errors import (
    QueueNotFound,
    StoreError,
    StoreFull,
)
from ocd.store.rows import claimed, fifo_claimed
from ocd.store.sqlite import fifo, layout, removal, sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.layout import Enqueue
from ocd.store.sqlite.ops import (
    Call,
    Tx,
    fetch_all,
    fetch_one,
    read_all,
    read_one,
)
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

log = logging.getLogger(__name__)


class SqliteMessages(SqliteCore):
    async def enqueue(self, queue: QueueRecord, messages: Sequence[NewMessage]) -> Backlog:
        # Straight to the writer, and the backlog from memory when it is known: every
        # coroutine layer here is paid by every send.
        if self._closing or self._writer is None:
            raise StoreError("the store is closed", self.where, "send")
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if self.space.full is not None:  # refused up front: the room left is for acks
            raise StoreFull(self.space.full, self.where, "send")
        if queue.fifo:
            backlog, _ = await self.enqueue_fifo(queue, messages)
            return backlog
        await self._writer.submit(Enqueue(queue, messages))
        known = self.catalogue.backlog(queue.key)
        return known if known is not None else await self.backlog(queue)

    async def enqueue_fifo(
        self, queue: QueueRecord, messages: Sequence[NewMessage]
    ) -> tuple[Backlog, list[FifoSent]]:
        if not self.catalogue.knows(queue.key):
            raise QueueNotFound(queue.name)
        if self.space.full is not None:
            raise StoreFull(self.space.full, self.where, "send")
        sent: list[FifoSent] = await self._submit(
            Call(fifo.enqueue, queue, messages, most_rows=2 * len(messages), grows=True)
        )
        known = self.catalogue.backlog(queue.key)
        return (known if known is not None else await self.backlog(queue)), sent

    async def ready(self, queue: QueueRecord, now_ms: int, limit: int) -> Ready:
        assert self._r is not None
        if queue.fifo:
            statement, params = sql.READY_FIFO, {"q": queue.key, "now": now_ms, "n": limit}
        else:
            start, end = layout.band(queue.key)
            statement = sql.READY_LOG
            params = {"q": queue.key, "now": now_ms, "n": limit, "start": start, "end": end}
        try:
            row = self._quick_one(statement, params) or await read_one(self._r, statement, params)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        if queue.fifo:
            count, first, nxt = row
            return Ready(count, first, nxt)
        count, at_cursor, held, lapsed, held_next, lease_next = row
        firsts = [t for t in (at_cursor, held, lapsed) if t is not None]
        nexts = [t for t in (held_next, lease_next) if t is not None]
        return Ready(min(count, limit), min(firsts, default=None), min(nexts, default=None))

    async def claim(self, queue: QueueRecord, ask: Claim) -> Claimed:
        lease = secrets.randbits(62) + 1

        def claim(tx: Tx) -> Claimed:
            if ask.max_batches is not None:
                statement = sql.PUSH_LEASES_HELD if queue.fifo else sql.LOG_PUSH_LEASES_HELD
                (held,) = fetch_one(tx.conn, statement, (queue.key, ask.now_ms))
                if held >= ask.max_batches:
                    return Claimed([])
            if queue.fifo:
                return self._claim_fifo(tx, queue, ask, lease)
            return self._claim_log(tx, queue, ask, lease)

        result: Claimed = await self._submit(Call(claim, durable=False, most_rows=ask.limit))
        return result

    def _claim_log(self, tx: Tx, queue: QueueRecord, ask: Claim, lease: int) -> Claimed:
        """The run of the ready band from the cursor, under one new lease row; what was due
        meanwhile (held messages, lapsed leases) is appended first."""
        key, now = queue.key, ask.now_ms
        layout.promote(tx, key, now)
        layout.lapse(tx, key, now)
        end = layout.band(key)[1]
        at = layout.cursor(tx, key)
        rows = fetch_all(tx.conn, sql.LOG_RUN, (at, end, ask.limit, now))
        if not rows:
            return Claimed([])
        split = claimed(rows, lease, ask.max_attempts)
        lo, hi = rows[0][0], rows[-1][0]
        tx.conn.execute(sql.SET_CURSOR, (hi + 1, key))
        if split.deliveries:
            tx.conn.execute(
                sql.INSERT_LEASE, (lease, key, lo, hi, int(ask.kind), now, ask.lease_until_ms)
            )
        if split.spent:
            removal.dead_letter(self.catalogue, tx, queue, split.spent, ask.dead_letter, now)
        return Claimed(split.deliveries, split.exhausted)

    def _claim_fifo(self, tx: Tx, queue: QueueRecord, ask: Claim, lease: int) -> Claimed:
        rows = fifo.claim(
            tx, queue, ask.limit, ask.now_ms, ask.lease_until_ms, lease, int(ask.kind)
        )
        split = fifo_claimed(rows, lease, ask.max_attempts)
        if split.spent:
            removal.dead_letter(self.catalogue, tx, queue, split.spent, ask.dead_letter, ask.now_ms)
            fifo.refresh(tx, queue.key, split.groups)
        return Claimed(split.deliveries, split.exhausted)

    def _settle_fifo(
        self,
        tx: Tx,
        queue: QueueRecord,
        acks: Sequence[int],
        retries: Sequence[Retry],
        dead: Sequence[int],
        dead_letter: DeadLetter,
        now_ms: int,
    ) -> Settled:
        held = fifo.hold_back(tx, queue, set(acks), retries, dead)
        groups = set(held.groups)
        acked = removal.delete(tx, queue, acks, groups)
        retried = 0
        if held.retries:
            cur = tx.conn.executemany(
                sql.RETRY, ((visible, seq, queue.key) for seq, visible in held.retries)
            )
            retried = max(cur.rowcount, 0)
        if held.back:
            fifo.release_any(tx, queue, held.back, now_ms)
        moved, deleted = removal.dead_letter(
            self.catalogue, tx, queue, held.dead, dead_letter, now_ms, groups
        )
        fifo.refresh(tx, queue.key, groups)
        if held.retries or held.back or moved:
            tx.notify.add(queue.key)
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
        def settle(tx: Tx) -> Settled:
            if queue.fifo:
                return self._settle_fifo(tx, queue, acks, retries, dead, dead_letter, now_ms)
            acked = removal.delete(tx, queue, acks)
            retried = 0
            if retries:
                at = layout.cursor(tx, queue.key)
                cur = tx.conn.executemany(
                    sql.HOLD,
                    (
                        {"until": visible, "q": queue.key, "now": now_ms, "seq": seq, "next": at}
                        for seq, visible in retries
                    ),
                )
                retried = max(cur.rowcount, 0)
                layout.promote(tx, queue.key, now_ms)
                layout.drop_empty_leases(tx, queue.key, [r.seq for r in retries])
            moved, deleted = removal.dead_letter(
                self.catalogue, tx, queue, dead, dead_letter, now_ms
            )
            return Settled(acked, retried, moved, deleted)

        most_rows = len(acks) + len(retries) + len(dead)
        result: Settled = await self._submit(Call(settle, durable=False, most_rows=most_rows))
        return result

    async def release(
        self,
        queue: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
        kind: LeaseKind = LeaseKind.PUSH,
    ) -> int:
        def release(tx: Tx) -> int:
            if not queue.fifo:
                return self._release_log(tx, queue, seqs, now_ms, kind)
            n, groups = fifo.release_any(tx, queue, seqs, now_ms, int(kind))
            if groups:
                fifo.refresh(tx, queue.key, groups)
            tx.notify.add(queue.key)
            return n

        result: int = await self._submit(Call(release, durable=False))
        return result

    def _release_log(
        self, tx: Tx, queue: QueueRecord, seqs: Sequence[int], now_ms: int, kind: LeaseKind
    ) -> int:
        """Handed back: appended anew, the attempt given back (the first receive stays), if
        still under a lease of that kind."""
        by_claim: dict[int, list[int]] = {}
        for seq in seqs:
            row = fetch_one(tx.conn, sql.LEASE_OF, (queue.key, seq))
            if row is not None and row[0] <= seq and row[1] == int(kind):
                by_claim.setdefault(row[2], []).append(seq)
        n = 0
        for claimed_ms, ours in by_claim.items():
            n += layout.reappend(tx, queue.key, ours, now_ms, first_ms=claimed_ms)[0]
        layout.drop_empty_leases(tx, queue.key, seqs)
        return n

    async def expire(self, now_ms: int, batch: int = 5000) -> list[Expired]:
        expired: list[Expired] = []
        # Exact in memory (this node makes every change): an empty queue, or a standard one
        # with nothing old enough, has nothing to expire or compact: no write, no look.
        # Only the queues holding messages are looked at, not every queue (10,000 idle).
        busy = [q for key in self.catalogue.with_messages() if (q := self.catalogue.by_key(key))]
        for queue in sorted(busy, key=lambda q: (q.account, q.name)):
            cutoff = now_ms - queue.settings.message_retention_period_s * 1000
            known = self.catalogue.backlog(queue.key)
            if known is not None and not queue.fifo and known.oldest_ms >= cutoff:
                continue

            def expire(tx: Tx, q: QueueRecord = queue, cutoff: int = cutoff) -> int:
                if q.fifo:
                    seqs = [
                        s for (s,) in fetch_all(tx.conn, sql.EXPIRED_FIFO, (q.key, cutoff, batch))
                    ]
                    removal.delete(tx, q, seqs)
                    return len(seqs)
                rows = fetch_all(tx.conn, sql.EXPIRE, (q.key, cutoff, batch))
                if rows:
                    tx.removed(q.key, len(rows), sum(r[0] for r in rows))
                    layout.removed(tx, q.key, [r[2] for r in rows])
                return len(rows)

            total = 0
            while True:
                n: int = await self._submit(Call(expire, durable=False))
                total += n
                if n < batch:
                    break
            if total:
                expired.append(Expired(queue.account, queue.name, total))
            if queue.fifo and self.space.full is None:
                # it writes rows: a disk that fills meanwhile leaves it for the next sweep
                with contextlib.suppress(StoreFull):
                    await self._submit(Call(fifo.compact, queue.key, durable=False, grows=True))
        if not self.catalogue.any_fifo():
            return expired  # deduplication ids are FIFO queues' alone
        while await self._submit(Call(fifo.prune_dedup, now_ms, batch, durable=False)):
            pass
        return expired

    async def purge(self, queue: QueueRecord, now_ms: int) -> int:
        def purge(tx: Tx) -> int:
            cur = tx.conn.execute(sql.DELETE_QUEUE_MESSAGES, (queue.key,))
            fifo.purge(tx, queue.key)
            layout.clear(tx, queue.key)
            tx.conn.execute(sql.MARK_PURGED, (now_ms, queue.key))
            n = max(cur.rowcount, 0)
            tx.removed(queue.key, *self.catalogue.counts(queue.key))
            return n

        result: int = await self._submit(Call(purge))
        current = self.catalogue.by_key(queue.key)
        if current is not None:
            self.catalogue.remember(dataclasses.replace(current, purged_ms=now_ms))
        return result

    async def peek(self, queue: QueueRecord, now_ms: int, limit: int) -> list[Delivery]:
        """Ready messages, oldest first, without leasing them or counting an attempt."""
        assert self._r is not None
        try:
            if queue.fifo:
                rows = await read_all(
                    self._r, sql.PEEK, {"q": queue.key, "now": now_ms, "n": limit}
                )
            else:
                end = layout.band(queue.key)[1]
                rows = [
                    r[:-1]
                    for r in await read_all(
                        self._r,
                        sql.PEEK_LOG,
                        {"q": queue.key, "end": end, "now": now_ms, "n": limit},
                    )
                ]
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return [
            Delivery(seq, mid, ct, body, sent, att, 0, grp, fseq, dedup, attrs)
            for seq, mid, ct, body, sent, att, grp, fseq, dedup, attrs in rows
        ]

    async def delete_messages(self, queue: QueueRecord, seqs: Sequence[int]) -> int:
        def delete(tx: Tx) -> int:
            return removal.delete(tx, queue, seqs)

        result: int = await self._submit(Call(delete))
        return result

    async def queue_stats(self, now_ms: int) -> dict[int, NotReady]:
        assert self._r is not None
        out: dict[int, NotReady] = {}
        try:
            for q in self.catalogue.queues():
                if q.fifo:
                    statement = sql.NOT_READY_ALL if q.settings.delivery_delay_s else sql.NOT_READY
                    not_ready, leased = await read_one(
                        self._r, statement, {"q": q.key, "now": now_ms}
                    )
                else:
                    held, leased = await read_one(
                        self._r, sql.NOT_READY_LOG, {"q": q.key, "now": now_ms}
                    )
                    not_ready = held + leased
                out[q.key] = NotReady(not_ready, leased)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return out

    async def backlog(self, queue: QueueRecord) -> Backlog:
        known = self.catalogue.backlog(queue.key)
        if known is not None:
            return known
        assert self._r is not None
        try:
            statement = sql.OLDEST_FIFO if queue.fifo else sql.OLDEST
            found = (await read_one(self._r, statement, (queue.key,)) or (None,))[0]
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        oldest = found or 0
        self.catalogue.set_oldest(queue.key, oldest)
        count, size = self.catalogue.counts(queue.key)
        return Backlog(count, size, oldest)
