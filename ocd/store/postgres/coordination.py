"""Coordination on PostgreSQL: secrets, cron ticks and the clock's mark, shared by every
node through the database.
"""

from __future__ import annotations

import secrets

from ocd.store.postgres import sql
from ocd.store.postgres.core import PostgresCore
from ocd.store.rows import CLOCK_MARK_KEY, mark_from_bytes, mark_to_bytes


class PostgresCoordination(PostgresCore):
    # ---------------------------------------------------------------- secrets and the clock's mark

    async def secret(self, name: str) -> bytes:
        async with self._db("read secret") as c, c.transaction():
            await self._durable(c)
            await c.execute(sql.PUT_META, name, secrets.token_bytes(32))
            value = await c.fetchval(sql.GET_META, name)
        return bytes(value)

    async def clock_mark(self) -> int:
        async with self._db("read the clock's mark") as c:
            value = await c.fetchval(sql.GET_META, CLOCK_MARK_KEY)
        return mark_from_bytes(value)

    async def save_clock_mark(self, now_ms: int) -> None:
        async with self._db("save the clock's mark") as c:
            await c.execute(sql.RAISE_META, CLOCK_MARK_KEY, mark_to_bytes(now_ms))

    # ---------------------------------------------------------------- cron triggers

    async def claim_cron_tick(self, schedule: str, due_ms: int, node: str) -> bool:
        async with self._db("claim cron tick") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(sql.CLAIM_CRON_TICK, schedule, due_ms, node)
        return row is not None

    async def cron_last_ticks(self) -> dict[str, int]:
        async with self._db("read cron ticks") as c:
            rows = await c.fetch(sql.CRON_LAST_TICKS)
        return {str(r["schedule"]): int(r["due_ms"]) for r in rows}
