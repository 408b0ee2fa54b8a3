"""The SQLite backend's Browsing facet: pages, single messages and searches, on the read
connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ocd.store import rules
from ocd.store.rows import merged_page
from ocd.store.sqlite import layout, sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.ops import read_all
from ocd.store.values import Browsed, BrowseQuery, QueueRecord, Searched, SearchQuery


class SqliteBrowsing(SqliteCore):
    async def browse(self, queue: QueueRecord, now_ms: int, query: BrowseQuery) -> list[Browsed]:
        top = 1 << 62
        after = query.after
        if after is None:
            after_t = (top, top) if query.newest_first else (-1, -1)
        else:
            after_t = (after.sent_ms, after.seq)
        params = {
            "q": queue.key,
            "now": now_ms,
            "b": query.body_bytes,
            "cs": after_t[0],
            "cq": after_t[1],
            "from": query.sent_from_ms if query.sent_from_ms is not None else 0,
            "to": query.sent_to_ms if query.sent_to_ms is not None else top,
            "att": query.min_attempts,
            "n": query.limit,
            **_band(queue),
        }
        found = await self._browsed(sql.browse(query.newest_first, query.state), params)
        return merged_page(found, query)

    async def message(self, queue: QueueRecord, seq: int, body_bytes: int) -> Browsed | None:
        params = {"q": queue.key, "seq": seq, "b": body_bytes, "now": 0}
        rows = await self._browsed(sql.MESSAGE_BY_SEQ, params)
        return rows[0] if rows else None

    async def present(self, queue: QueueRecord, seqs: Sequence[int]) -> list[int]:
        assert self._r is not None
        params = {"q": queue.key, "seqs": json.dumps(list(seqs))}
        try:
            return [seq for (seq,) in await read_all(self._r, sql.PRESENT_SEQS, params)]
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e

    async def search(self, queue: QueueRecord, now_ms: int, query: SearchQuery) -> Searched:
        needle, scan_limit = query.needle, query.scan_limit
        message_id = rules.searchable_id(query.message_id)
        limit, body_bytes = query.limit, query.body_bytes
        params = {
            "q": queue.key,
            "now": now_ms,
            "b": body_bytes,
            "scan": scan_limit,
            "needle": needle,
            "id": message_id,
            "n": limit,
            **_band(queue),
        }
        rows = await self._browsed(sql.SEARCH, params)
        # the window: the newest scan_limit messages, or all of them if fewer
        window = min(scan_limit, self.catalogue.count(queue.key))
        return Searched(rows, int(window))

    async def _browsed(self, statement: str, params: dict[str, Any]) -> list[Browsed]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, statement, params)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return [
            Browsed(seq, mid, ct, bytes(body), size, sent, vis, att, bool(leased), grp, fseq)
            for seq, mid, ct, body, size, sent, vis, att, leased, grp, fseq in rows
        ]


def _band(queue: QueueRecord) -> dict[str, int]:
    """A queue's ready band, where its rows in order are."""
    lo, end = layout.band(queue.key)
    return {"lo": lo, "end": end}
