"""Queues and consumers: create, list, get, update, edit, delete, metrics, purge."""

from __future__ import annotations

import secrets
from typing import Any

from aiohttp import web

from ocd.api.context import QUEUE_NAME, ApiContext, iso, pull_consumer_json
from ocd.api.envelope import (
    CONSUMER_EXISTS,
    CONSUMER_NOT_FOUND,
    QUEUE_EXISTS,
    QUEUE_IN_USE,
    QUEUE_NOT_FOUND,
    ApiError,
    ApiRouter,
    invalid,
    ok,
)
from ocd.api.validate import Fields, json_object
from ocd.store import PullConsumer, QueueRecord, QueueSettings

SETTINGS_KEYS = ("delivery_delay", "message_retention_period", "delivery_paused")
MAX_PER_PAGE = 1000


def _settings(f: Fields, base: QueueSettings) -> QueueSettings:
    s = f.object("settings", SETTINGS_KEYS)
    return QueueSettings(
        s.integer("delivery_delay", 0, 86_400, base.delivery_delay_s),
        s.integer("message_retention_period", 60, 1_209_600, base.message_retention_period_s),
        s.boolean("delivery_paused", base.delivery_paused),
    )


def _queue_name(f: Fields, required: bool) -> str | None:
    name: str | None = f.string("queue_name") if required else f.string("queue_name", None)
    if name is not None and not QUEUE_NAME.fullmatch(name):
        raise invalid(
            "queue_name must be 1..63 characters of letters, digits, '-' and '_', "
            "starting with a letter or digit",
            "/queue_name",
        )
    return name


class QueueRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def add_to(self, router: ApiRouter, prefix: str = "") -> None:
        base = prefix + "/accounts/{account_id}/queues"
        q = base + "/{queue_id}"
        router.add_post(base, self.create)
        router.add_get(base, self.list)
        router.add_get(q, self.get)
        router.add_put(q, self.update)
        router.add_patch(q, self.edit)
        router.add_delete(q, self.delete)
        router.add_get(q + "/metrics", self.metrics)
        router.add_post(q + "/purge", self.purge)
        router.add_get(q + "/purge", self.purge_status)
        router.add_post(q + "/consumers", self.create_consumer)
        router.add_get(q + "/consumers", self.list_consumers)
        router.add_get(q + "/consumers/{consumer_id}", self.get_consumer)
        router.add_put(q + "/consumers/{consumer_id}", self.update_consumer)
        router.add_delete(q + "/consumers/{consumer_id}", self.delete_consumer)

    # ---------------------------------------------------------------- queues

    async def create(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        f = Fields(await json_object(request), known=("queue_name", "settings", "jurisdiction"))
        name = _queue_name(f, required=True)
        assert name is not None
        settings = _settings(f, QueueSettings())
        async with self.ctx.pull.admin_lock:  # a concurrent create of the same name gets a 409
            if self.ctx.store.queue(name, account) is not None:
                raise ApiError(409, QUEUE_EXISTS, f"A queue named {name} already exists")
            q = await self.ctx.store.ensure_queue(name, account, settings, self.ctx.clock())
        return ok(self.ctx.queue_json(q))

    async def list(self, request: web.Request) -> web.Response:
        account = self.ctx.account(request)
        names = request.query.getall("name", [])
        page = _query_int(request, "page", 1, 1, 1_000_000)
        per_page = _query_int(request, "per_page", 100, 1, MAX_PER_PAGE)
        queues = [
            q
            for q in self.ctx.store.queues()
            if q.account == account and (not names or q.name in names)
        ]
        chunk = queues[(page - 1) * per_page : page * per_page]
        info = {
            "page": page,
            "per_page": per_page,
            "count": len(chunk),
            "total_count": len(queues),
            "total_pages": max(1, -(-len(queues) // per_page)),
        }
        return ok([self.ctx.queue_json(q) for q in chunk], result_info=info)

    async def get(self, request: web.Request) -> web.Response:
        return ok(self.ctx.queue_json(self.ctx.queue(request)))

    async def update(self, request: web.Request) -> web.Response:
        """PUT: the settings are replaced as a whole; absent ones go back to defaults."""
        return await self._change(request, full=True)

    async def edit(self, request: web.Request) -> web.Response:
        return await self._change(request, full=False)

    async def _change(self, request: web.Request, full: bool) -> web.Response:
        q = self.ctx.queue(request)
        f = Fields(await json_object(request), known=("queue_name", "settings", "jurisdiction"))
        name = _queue_name(f, required=False)
        _settings(f, QueueSettings())  # reject a bad body before waiting for the lock
        # Read-modify-write under the lock: two concurrent PATCHes must not undo each other,
        # and a rename must not race a create of the same name.
        async with self.ctx.pull.admin_lock:
            current = self._current(q)
            settings = _settings(f, QueueSettings() if full else current.settings)
            if name is not None and name != current.name:
                self._not_bound(current, "renamed")
                if self.ctx.store.queue(name, current.account) is not None:
                    raise ApiError(409, QUEUE_EXISTS, f"A queue named {name} already exists")
            q = await self.ctx.store.update_queue(current, settings, self.ctx.clock(), name)
        return ok(self.ctx.queue_json(q))

    async def delete(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        async with self.ctx.pull.admin_lock:
            q = self._current(q)
            self._not_bound(q, "deleted")
            await self.ctx.store.delete_queue(q)
        return ok(None)

    def _current(self, q: QueueRecord) -> QueueRecord:
        """``q`` as it is now (the caller holds ``pull.admin_lock``): it may have been
        changed or deleted while the request body was read or the lock awaited."""
        current = self.ctx.store.queue_by_id(q.queue_id)
        if current is None:
            raise ApiError(404, QUEUE_NOT_FOUND, f"Queue not found: {q.name}")
        return current

    def _not_bound(self, q: QueueRecord, verb: str) -> None:
        named_by = self.ctx.bound_by(q)
        if named_by:
            raise ApiError(
                409,
                QUEUE_IN_USE,
                f"queue {q.name} cannot be {verb}: ocd's config file names it "
                f"({', '.join(named_by)}); remove it there and reload first",
            )

    async def metrics(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        b = await self.ctx.store.backlog(q)
        return ok(
            {
                "backlog_count": b.count,
                "backlog_bytes": b.bytes,
                "oldest_message_timestamp_ms": b.oldest_ms,
            }
        )

    async def purge(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        f = Fields(
            await json_object(request, optional=True), known=("delete_messages_permanently",)
        )
        if f.boolean("delete_messages_permanently", False) is not True:
            raise invalid(
                "purging deletes every message of the queue; send "
                '{"delete_messages_permanently": true} to confirm',
                "/delete_messages_permanently",
            )
        await self.ctx.store.purge(q, self.ctx.clock())
        current = self.ctx.store.queue(q.name, q.account) or q
        return ok(self.ctx.queue_json(current))

    async def purge_status(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        # A purge completes inside its request, so the last one is always complete.
        return ok(
            {
                "started_at": iso(q.purged_ms),
                "completed": "true" if q.purged_ms is not None else "false",
            }
        )

    # ---------------------------------------------------------------- consumers

    async def list_consumers(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        c = self.ctx.consumer_json(q)
        return ok([] if c is None else [c])

    def _consumer(self, request: web.Request) -> tuple[QueueRecord, dict[str, Any]]:
        q = self.ctx.queue(request)
        c = self.ctx.consumer_json(q)
        if c is None or c["consumer_id"] != request.match_info["consumer_id"]:
            raise ApiError(404, CONSUMER_NOT_FOUND, "Consumer not found")
        return q, c

    async def get_consumer(self, request: web.Request) -> web.Response:
        return ok(self._consumer(request)[1])

    async def create_consumer(self, request: web.Request) -> web.Response:
        q = self.ctx.queue(request)
        consumer = await self._consumer_input(request, q)
        async with self.ctx.pull.admin_lock:  # of two concurrent creates, one gets the 409
            q = self._current(q)
            if self.ctx.consumer_json(q) is not None:
                raise ApiError(
                    409,
                    CONSUMER_EXISTS,
                    f"queue {q.name} already has a consumer; a queue has one consumer at a time",
                )
            return ok(await self._put_consumer(q, consumer))

    async def update_consumer(self, request: web.Request) -> web.Response:
        """PUT updates the pull consumer, or creates it ("updates or creates")."""
        q = self.ctx.queue(request)
        consumer = await self._consumer_input(request, q)
        async with self.ctx.pull.admin_lock:
            q = self._current(q)
            existing = self.ctx.consumer_json(q)
            if existing is not None and existing["type"] == "worker":
                raise _worker_consumer_refused()
            if (
                existing is not None
                and existing["consumer_id"] != request.match_info["consumer_id"]
            ):
                raise ApiError(404, CONSUMER_NOT_FOUND, "Consumer not found")
            return ok(await self._put_consumer(q, consumer))

    async def _consumer_input(self, request: web.Request, q: QueueRecord) -> PullConsumer:
        f = Fields(
            await json_object(request),
            known=("type", "dead_letter_queue", "settings", "script_name", "environment_name"),
        )
        kind = f.string("type", "http_pull")
        if kind == "worker":
            raise _worker_consumer_refused()
        if kind != "http_pull":
            raise invalid('type must be "http_pull"', "/type")
        s = f.object(
            "settings", ("batch_size", "max_retries", "visibility_timeout_ms", "retry_delay")
        )
        dlq = f.string("dead_letter_queue", None) or None
        if dlq is not None:
            if not QUEUE_NAME.fullmatch(dlq):
                raise invalid("dead_letter_queue is not a valid queue name", "/dead_letter_queue")
            if dlq == q.name:
                raise invalid(
                    f'dead letter queue for queue "{q.name}" cannot be itself',
                    "/dead_letter_queue",
                )
        return PullConsumer(
            q.key,
            secrets.token_hex(16),
            self.ctx.clock(),
            dlq,
            s.integer("batch_size", 1, 100, 10),
            s.integer("max_retries", 0, 100, 3),
            s.integer("visibility_timeout_ms", 1, 43_200_000, 30_000),
            s.integer("retry_delay", 0, 86_400, 0),
        )

    async def _put_consumer(self, q: QueueRecord, consumer: PullConsumer) -> dict[str, Any]:
        """Store it; the caller holds ``pull.admin_lock``."""
        dlq = consumer.dead_letter_queue
        if dlq is not None:  # like Cloudflare, a missing dead-letter queue is created
            await self.ctx.store.ensure_queue(dlq, q.account, None, self.ctx.clock())
        stored = await self.ctx.store.put_pull_consumer(q, consumer)
        return pull_consumer_json(q, stored)

    async def delete_consumer(self, request: web.Request) -> web.Response:
        q, c = self._consumer(request)
        if c["type"] == "worker":
            raise ApiError(
                409,
                QUEUE_IN_USE,
                f"the consumer of {q.name} is worker {c['script_name']} in ocd's config file; "
                "remove it there",
            )
        async with self.ctx.pull.admin_lock:
            await self.ctx.store.delete_pull_consumer(self._current(q))
        return ok(None)


def _worker_consumer_refused() -> ApiError:
    return invalid(
        "worker consumers are configured in ocd's config file "
        "([[workers.queues.consumers]]), not over the API",
        "/type",
    )


def _query_int(request: web.Request, key: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    # ASCII only: "²".isdigit() is true but int() refuses it; a short string: int() refuses
    # thousands of digits.
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not lo <= int(raw) <= hi:
        raise invalid(f"query parameter {key} must be an integer {lo}..{hi}")
    return int(raw)
