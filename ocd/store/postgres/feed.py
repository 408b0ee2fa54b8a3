"""The change feed: LISTEN/NOTIFY on one connection of its own, with a polling fallback.

Commits notify ``ocd_q_<key>`` (messages of that queue may be ready) and ``ocd_catalogue``
(queues or consumers changed). The feed sets the matching wake-up events and reloads the
catalogue. Every ``CATALOGUE_FRESH_S`` it also re-makes a lost connection; only then
(notifications may have been missed while it was down), or while it cannot be made, does
it set every event: a dispatcher reads its queue when something may have changed, not
every second (10,000 idle queues were 10,000 reads a second). A channel listened to anew
sets its event once it is live, for what was committed before. The connection runs one
command at a time, so its LISTENs take turns (one at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from ocd.store.postgres import sql

log = logging.getLogger(__name__)


class Feed:
    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        on_queue: Callable[[int], None],
        on_catalogue: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._on_queue = on_queue
        self._on_catalogue = on_catalogue
        self._conn: asyncpg.Connection | None = None
        self._channels: set[str] = set()
        self._turn = asyncio.Lock()  # one LISTEN at a time on the connection
        self.connects = 0  # connections made: a new one may have missed notifications

    async def ensure(self) -> bool:
        """Connected and listening on every channel asked for; False if the database
        cannot be reached now."""
        if self._conn is not None and not self._conn.is_closed():
            return True
        try:
            async with self._turn:
                conn = await self._connect()
                await conn.add_listener(sql.CATALOGUE_CHANNEL, self._notified)
                for ch in list(self._channels):
                    await conn.add_listener(ch, self._notified)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as e:
            log.debug("change feed: cannot connect: %s", e)
            return False
        self._conn = conn
        self.connects += 1
        return True

    def listen(self, key: int) -> None:
        """Start listening to queue ``key``'s channel (in the background)."""
        ch = sql.queue_channel(key)
        if ch in self._channels:
            return
        self._channels.add(ch)
        if self._conn is not None and not self._conn.is_closed():
            task = asyncio.get_running_loop().create_task(self._add(key), name="ocd-pg-listen")
            task.add_done_callback(_quiet)

    async def _add(self, key: int) -> None:
        ch = sql.queue_channel(key)
        async with self._turn:
            conn = self._conn
            if conn is None or conn.is_closed():
                return  # the next connection listens to it (``ensure``)
            try:
                await conn.add_listener(ch, self._notified)
            except BaseException:
                # Deaf to this channel: a new connection (the next tick) listens to every
                # channel again and wakes every queue.
                with contextlib.suppress(Exception):
                    conn.terminate()
                raise
        self._on_queue(key)  # what was committed before the LISTEN was live

    def _notified(self, _conn: Any, _pid: int, channel: str, _payload: str) -> None:
        if channel == sql.CATALOGUE_CHANNEL:
            self._on_catalogue()
        elif channel.startswith("ocd_q_"):
            with contextlib.suppress(ValueError):
                self._on_queue(int(channel[6:]))

    async def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close(timeout=2)
            self._conn = None


def _quiet(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("change feed: listen failed: %s", task.exception())
