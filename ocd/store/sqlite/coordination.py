"""The SQLite backend's Coordination facet: secrets, cron ticks and the clock's mark."""

from __future__ import annotations

import secrets
import sqlite3

from ocd.store.rows import (
    CLOCK_MARK_KEY,
    mark_from_bytes,
    mark_to_bytes,
)
from ocd.store.sqlite import sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.ops import (
    Call,
    Tx,
    fetch_all,
    fetch_one,
    read_all,
)


class SqliteCoordination(SqliteCore):
    async def secret(self, name: str) -> bytes:
        """A random key kept in the database (created on first use), e.g. to sign leases."""

        def get(tx: Tx) -> bytes:
            tx.conn.execute(sql.PUT_META, (name, secrets.token_bytes(32)))
            (value,) = fetch_one(tx.conn, sql.GET_META, (name,))
            return bytes(value)

        value: bytes = await self._submit(Call(get))
        return value

    async def claim_cron_tick(self, schedule: str, due_ms: int, node: str) -> bool:
        def claim(tx: Tx) -> bool:
            return bool(fetch_all(tx.conn, sql.CLAIM_CRON_TICK, (schedule, due_ms, node)))

        claimed: bool = await self._submit(Call(claim))
        return claimed

    async def cron_last_ticks(self) -> dict[str, int]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.CRON_LAST_TICKS, ())
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return {str(name): int(due) for name, due in rows}

    async def clock_mark(self) -> int:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.GET_META, (CLOCK_MARK_KEY,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return mark_from_bytes(rows[0][0] if rows else None)

    async def save_clock_mark(self, now_ms: int) -> None:
        def save(tx: Tx) -> None:
            tx.conn.execute(sql.RAISE_META, (CLOCK_MARK_KEY, mark_to_bytes(now_ms)))

        # Not durable by itself: the next durable commit (a send) syncs it. One row: it may
        # commit on the loop, without a hop to the writer's thread every MARK_EVERY_S, and
        # is quiet: the checkpoint loop need not copy it at once (core.QUIET_COMMITS).
        await self._submit(Call(save, durable=False, most_rows=1, quiet=True))
