"""What the API handlers share: the domain operations, accounts, and what the config says."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from ocd.admin import Admin, worker_consumer_id
from ocd.clock import Clock
from ocd.config import Config
from ocd.http.cloudflare.auth import Accounts
from ocd.http.cloudflare.envelope import QUEUE_NOT_FOUND, ApiError
from ocd.names import QUEUE_NAME as QUEUE_NAME  # re-exported for the API modules
from ocd.producer import Producer
from ocd.pull import PullService
from ocd.store import Browsing, CatalogueReads, Messages, PullConsumer, QueueRecord


class ApiStore(CatalogueReads, Messages, Browsing, Protocol):
    """What the Cloudflare API handlers read of the store themselves (writes go through the
    producer, the pull service and admin): the catalogue, peeks, backlogs and counts, and
    the browse and search of the ocd extension."""


@dataclass
class ApiContext:
    store: ApiStore
    producer: Producer
    pull: PullService
    admin: Admin  # queue and consumer administration; also what the config names
    accounts: Accounts
    clock: Clock
    # (account, queue) -> workers whose producer bindings name it in the config
    producers: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    workers: set[tuple[str, str]] = field(default_factory=set)  # (account, worker name)
    search_scan_limit: int = 100_000  # newest messages a payload search looks at

    @classmethod
    def from_config(
        cls,
        config: Config,
        store: ApiStore,
        producer: Producer,
        pull: PullService,
        admin: Admin,
        clock: Clock,
    ) -> ApiContext:
        ctx = cls(
            store,
            producer,
            pull,
            admin,
            Accounts(
                {a.id: a.token_sha256 for a in config.accounts},
                [h for a in config.accounts for h in a.read_only_sha256],
            ),
            clock,
        )
        ctx.search_scan_limit = config.ui.search_scan_limit
        for w in config.workers:
            ctx.workers.add((w.account, w.name))
            for p in w.producers:
                ctx.producers.setdefault((w.account, p.queue), []).append(w.name)
        return ctx

    def account(self, request: web.Request) -> str:
        account = request.match_info["account_id"]
        self.accounts.check(request, account)
        return account

    async def queue(self, request: web.Request) -> QueueRecord:
        """The queue in the path (by id or by name), only within the caller's account: a
        queue of another account is exactly as absent as one that does not exist. The
        catalogue answers; on a miss the database does (a queue made on another node)."""
        account = self.account(request)
        ref = request.match_info["queue_id"]
        q = self.store.queue_by_id(ref) or self.store.queue(ref, account)
        if q is None:
            q = await self.store.lookup_by_id(ref) or await self.store.lookup(ref, account)
        if q is not None and q.account != account:
            q = self.store.queue(ref, account) or await self.store.lookup(ref, account)
        if q is None:
            raise ApiError(404, QUEUE_NOT_FOUND, f"Queue not found: {ref}")
        return q

    # ---------------------------------------------------------------- JSON shapes

    def queue_json(self, q: QueueRecord) -> dict[str, Any]:
        producers = [
            {"type": "worker", "script": w} for w in self.producers.get((q.account, q.name), [])
        ]
        consumers = [c for c in [self.consumer_json(q)] if c is not None]
        settings: dict[str, Any] = {
            "delivery_delay": q.settings.delivery_delay_s,
            "delivery_paused": q.settings.delivery_paused,
            "message_retention_period": q.settings.message_retention_period_s,
        }
        if q.fifo:  # a standard queue's settings stay exactly Cloudflare's
            settings["content_based_deduplication"] = q.settings.content_based_deduplication
            settings["deduplication_scope"] = q.settings.deduplication_scope
        return {
            "queue_id": q.queue_id,
            "queue_name": q.name,
            "created_on": iso(q.created_ms),
            "modified_on": iso(q.modified_ms),
            "producers": producers,
            "producers_total_count": len(producers),
            "consumers": consumers,
            "consumers_total_count": len(consumers),
            "settings": settings,
        }

    def consumer_json(self, q: QueueRecord) -> dict[str, Any] | None:
        wc = self.admin.worker_consumer(q)
        if wc is not None:
            c = wc.consumer
            return {
                "consumer_id": worker_consumer_id(q, wc.worker),
                "created_on": iso(q.created_ms),
                "queue_name": q.name,
                "type": "worker",
                # wrangler finds a worker consumer by "script" or "service" (and then its
                # environment), Cloudflare's API documents "script_name": all three.
                "script": wc.worker,
                "script_name": wc.worker,
                "service": wc.worker,
                "environment": "production",
                "dead_letter_queue": c.dead_letter_queue or "",
                "settings": {
                    "batch_size": c.max_batch_size,
                    "max_retries": c.max_retries,
                    "max_wait_time_ms": int(c.max_batch_timeout_s * 1000),
                    "max_concurrency": c.max_concurrency,
                    "retry_delay": c.retry_delay_s,
                },
            }
        pc = self.store.pull_consumer(q)
        return None if pc is None else pull_consumer_json(q, pc)


def pull_consumer_json(q: QueueRecord, c: PullConsumer) -> dict[str, Any]:
    return {
        "consumer_id": c.consumer_id,
        "created_on": iso(c.created_ms),
        "queue_name": q.name,
        "type": "http_pull",
        "dead_letter_queue": c.dead_letter_queue or "",
        "settings": {
            "batch_size": c.batch_size,
            "max_retries": c.max_retries,
            "visibility_timeout_ms": c.visibility_timeout_ms,
            "retry_delay": c.retry_delay_s,
        },
    }


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
