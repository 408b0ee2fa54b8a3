"""KV namespaces on PostgreSQL, in ``ocd_kv``: one table every node reads and writes, so a
read after a write on any node sees it."""

from __future__ import annotations

from ocd.store.postgres import sql
from ocd.store.postgres.core import PostgresCore, _rowcount
from ocd.store.values import KvEntry, KvKey, KvNamespace, KvPage, prefix_end

EXPIRE_CHUNK = 5000


class PostgresKv(PostgresCore):
    async def kv_get(self, ns: KvNamespace, key: str, now_ms: int) -> KvEntry | None:
        async with self._db("read a KV key") as c:
            row = await c.fetchrow(sql.KV_GET, ns.account, ns.namespace_id, key, now_ms)
        if row is None:
            return None
        return KvEntry(bytes(row["value"]), row["expires_ms"], row["metadata"])

    async def kv_put(self, ns: KvNamespace, key: str, entry: KvEntry) -> None:
        async with self._db("write a KV key") as c, c.transaction():
            await self._durable(c)
            await c.execute(
                sql.KV_PUT,
                ns.account,
                ns.namespace_id,
                key,
                entry.value,
                entry.expires_ms,
                entry.metadata,
            )

    async def kv_delete(self, ns: KvNamespace, key: str) -> None:
        async with self._db("delete a KV key") as c, c.transaction():
            await self._durable(c)
            await c.execute(sql.KV_DELETE, ns.account, ns.namespace_id, key)

    async def kv_list(
        self, ns: KvNamespace, now_ms: int, prefix: str, after: str | None, limit: int
    ) -> KvPage:
        async with self._db("list KV keys") as c:
            rows = await c.fetch(
                sql.KV_LIST,
                ns.account,
                ns.namespace_id,
                prefix,
                after or "",
                prefix_end(prefix),
                now_ms,
                limit + 1,
            )
        keys = [KvKey(r["key"], r["expires_ms"], r["metadata"]) for r in rows]
        return KvPage(keys[:limit], len(keys) <= limit)

    async def kv_expire(self, now_ms: int) -> int:
        total = 0
        while True:
            async with self._db("expire KV keys") as c:
                status = await c.execute(sql.KV_EXPIRE, now_ms, EXPIRE_CHUNK)
            n = _rowcount(status)
            total += n
            if n < EXPIRE_CHUNK:
                return total
