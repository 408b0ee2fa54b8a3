"""Browsing on PostgreSQL: the dashboard's keyset pages, single messages and search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ocd.store import rules
from ocd.store.postgres import sql
from ocd.store.postgres.core import PostgresCore
from ocd.store.rows import merged_page
from ocd.store.values import Browsed, BrowseQuery, QueueRecord, Searched, SearchQuery


class PostgresBrowsing(PostgresCore):
    # ---------------------------------------------------------------- browsing

    async def browse(self, queue: QueueRecord, now_ms: int, query: BrowseQuery) -> list[Browsed]:
        top = 1 << 62
        after = query.after
        if after is None:
            after_t = (top, top) if query.newest_first else (-1, -1)
        else:
            after_t = (after.sent_ms, after.seq)
        low = query.sent_from_ms if query.sent_from_ms is not None else 0
        high = query.sent_to_ms if query.sent_to_ms is not None else top
        args: tuple[int, ...] = (queue.key, now_ms, query.body_bytes, *after_t, low, high)
        args += (query.min_attempts, query.limit)
        async with self._db("read") as c, c.transaction(isolation="repeatable_read", readonly=True):
            rows = await c.fetch(sql.browse(query.newest_first, query.state), *args)
            if not queue.fifo:  # and the messages in order, merged (one snapshot)
                rows += await c.fetch(sql.browse_in_order(query.newest_first, query.state), *args)
        return merged_page(map(_browsed, rows), query)

    async def message(self, queue: QueueRecord, seq: int, body_bytes: int) -> Browsed | None:
        async with self._db("read") as c:
            row = await c.fetchrow(sql.MESSAGE_BY_SEQ, queue.key, 0, body_bytes, seq)
        return None if row is None else _browsed(row)

    async def present(self, queue: QueueRecord, seqs: Sequence[int]) -> list[int]:
        async with self._db("read") as c:
            rows = await c.fetch(sql.PRESENT_SEQS, queue.key, list(seqs))
        return [row[0] for row in rows]

    async def search(self, queue: QueueRecord, now_ms: int, query: SearchQuery) -> Searched:
        needle, scan_limit = query.needle, query.scan_limit
        message_id = rules.searchable_id(query.message_id)
        limit, body_bytes = query.limit, query.body_bytes
        async with self._db("read") as c:
            rows = await c.fetch(
                sql.SEARCH, queue.key, now_ms, body_bytes, scan_limit, needle, message_id, limit
            )
            window_sql = sql.FIFO_SEARCH_WINDOW if queue.fifo else sql.SEARCH_WINDOW
            window = await c.fetchval(window_sql, queue.key, scan_limit)
        return Searched([_browsed(r) for r in rows], int(window))


def _browsed(r: Any) -> Browsed:
    seq, mid, ct, body, size, sent, vis, att, leased, grp, fseq = r
    return Browsed(seq, mid, ct, bytes(body), size, sent, vis, att, bool(leased), grp, fseq)
