"""The SQLite backend's Kv facet: KV namespaces in the ``kv`` table."""

from __future__ import annotations

import sqlite3
from typing import Any

from ocd.store.sqlite import sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.ops import Call, Tx, read_all
from ocd.store.values import KvEntry, KvKey, KvNamespace, KvPage, prefix_end

EXPIRE_CHUNK = 5000


class SqliteKv(SqliteCore):
    async def kv_get(self, ns: KvNamespace, key: str, now_ms: int) -> KvEntry | None:
        rows = await self._kv_read(sql.KV_GET, (ns.account, ns.namespace_id, key, now_ms))
        if not rows:
            return None
        value, expires_ms, metadata = rows[0]
        return KvEntry(bytes(value), expires_ms, metadata)

    async def kv_put(self, ns: KvNamespace, key: str, entry: KvEntry) -> None:
        def put(tx: Tx) -> None:
            tx.conn.execute(
                sql.KV_PUT,
                (ns.account, ns.namespace_id, key, entry.value, entry.expires_ms, entry.metadata),
            )

        await self._submit(Call(put, most_rows=1, grows=True))

    async def kv_delete(self, ns: KvNamespace, key: str) -> None:
        def delete(tx: Tx) -> None:
            tx.conn.execute(sql.KV_DELETE, (ns.account, ns.namespace_id, key))

        await self._submit(Call(delete, most_rows=1))

    async def kv_list(
        self, ns: KvNamespace, now_ms: int, prefix: str, after: str | None, limit: int
    ) -> KvPage:
        end = prefix_end(prefix)
        head = (ns.account, ns.namespace_id, prefix, after or "")
        if end is None:
            rows = await self._kv_read(sql.KV_LIST_UNBOUNDED, (*head, now_ms, limit + 1))
        else:
            rows = await self._kv_read(sql.KV_LIST, (*head, end, now_ms, limit + 1))
        keys = [KvKey(name, expires_ms, metadata) for name, expires_ms, metadata in rows]
        return KvPage(keys[:limit], len(keys) <= limit)

    async def kv_expire(self, now_ms: int) -> int:
        def expire(tx: Tx) -> int:
            return max(tx.conn.execute(sql.KV_EXPIRE, (now_ms, EXPIRE_CHUNK)).rowcount, 0)

        if self._quick_rows(sql.KV_ANY_EXPIRED, (now_ms,)) == []:
            return 0  # asked every few seconds: no hop to the writer's thread for nothing
        total = 0
        while True:
            # Not durable by itself: an expired key is invisible to reads whether or not
            # its deletion reached the disk.
            n: int = await self._submit(Call(expire, durable=False))
            total += n
            if n < EXPIRE_CHUNK:
                return total

    async def _kv_read(self, query: str, params: tuple[object, ...]) -> list[Any]:
        assert self._r is not None
        try:
            return await read_all(self._r, query, params)
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
