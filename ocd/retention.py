"""The retention sweep: messages past their queue's retention period are deleted, expired
KV keys freed, every few seconds while the daemon runs."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ocd.clock import Clock
from ocd.errors import StoreError
from ocd.metrics import Metrics
from ocd.store import Kv, Messages

log = logging.getLogger(__name__)

RETENTION_SWEEP_S = 5.0


class RetentionStore(Messages, Kv, Protocol):
    """What the sweep uses of the store: ``expire`` and ``kv_expire``."""


async def sweep_forever(
    store: RetentionStore, clock: Clock, metrics: Metrics, every_s: float = RETENTION_SWEEP_S
) -> None:
    """Sweep every ``every_s``; a failing database is logged once per outage and the next
    sweep tries again."""
    failing = False
    while True:
        try:
            expired = await store.expire(clock())
            # expired KV keys are invisible already; this frees their space
            await store.kv_expire(clock())
        except StoreError as e:  # the database is away: the next sweep tries again
            if not failing:  # one line per outage, not one per sweep
                log.warning(
                    "retention sweep failed (retrying every %.0f s): %s",
                    every_s,
                    e,
                    extra={"event": "sweep_failed"},
                )
            failing = True
            expired = []
        else:
            if failing:
                log.info("retention sweeps work again", extra={"event": "sweep_resumed"})
            failing = False
        for account, queue, n in expired:
            metrics.expired.labels(account, queue).inc(n)
            log.info(
                "queue %s: %d message(s) expired (retention period)",
                queue,
                n,
                extra={"event": "messages_expired", "queue": queue, "count": n},
            )
        await asyncio.sleep(every_s)
