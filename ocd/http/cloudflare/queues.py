"""Queues and consumers: create, list, get, update, edit, delete, metrics, purge.

The handlers validate requests and shape replies; the rules (unique names, what the config
file names, one consumer per queue, dead-letter queues made when missing) are
``ocd.admin``'s, whose errors become the envelope's codes here.
"""

from __future__ import annotations

import secrets
from typing import Any

from aiohttp import web

from ocd import limits
from ocd.admin import Admin
from ocd.counts import queue_counts
from ocd.errors import (
    ConsumerExists,
    ConsumerInConfig,
    ConsumerNotFound,
    DeadLetterTypeMismatch,
    FifoSettingOnStandard,
    QueueExists,
    QueueInUse,
    QueueTypeChange,
)
from ocd.http.cloudflare.context import QUEUE_NAME, ApiContext, iso, pull_consumer_json
from ocd.http.cloudflare.envelope import (
    CONSUMER_EXISTS,
    CONSUMER_NOT_FOUND,
    QUEUE_EXISTS,
    QUEUE_IN_USE,
    ApiError,
    ApiRouter,
    invalid,
    ok,
)
from ocd.http.cloudflare.validate import Fields, json_object
from ocd.names import QUEUE_NAME_RULE
from ocd.store import PullConsumer, QueueRecord, QueueSettings

SETTINGS_KEYS = (
    "delivery_delay",
    "message_retention_period",
    "delivery_paused",
    "content_based_deduplication",
    "deduplication_scope",
)
DEDUPLICATION_SCOPES = ("queue", "message_group")
MAX_PER_PAGE = 1000


def _settings(f: Fields, base: QueueSettings) -> QueueSettings:
    s = f.object("settings", SETTINGS_KEYS)
    scope = s.string("deduplication_scope", base.deduplication_scope)
    if scope not in DEDUPLICATION_SCOPES:
        raise invalid(
            f'deduplication_scope must be "queue" or "message_group", got "{scope}"',
            s.where("deduplication_scope"),
        )
    return QueueSettings(
        s.integer("delivery_delay", *limits.DELAY_S, base.delivery_delay_s),
        s.integer("message_retention_period", *limits.RETENTION_S, base.message_retention_period_s),
        s.boolean("delivery_paused", base.delivery_paused),
        s.boolean("content_based_deduplication", base.content_based_deduplication),
        scope,
    )


def _queue_name(f: Fields, required: bool) -> str | None:
    name: str | None = f.string("queue_name") if required else f.string("queue_name", None)
    if name is not None and not QUEUE_NAME.fullmatch(name):
        raise invalid(f"queue_name must be {QUEUE_NAME_RULE}, got {name!r}", "/queue_name")
    return name


def _fifo_setting(e: FifoSettingOnStandard) -> ApiError:
    return invalid(str(e), f"/settings/{e.setting}")


class QueueRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    @property
    def admin(self) -> Admin:
        return self.ctx.admin

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
        try:
            q = await self.admin.create_queue(account, name, settings)
        except QueueExists as e:
            raise _exists(e) from None
        except FifoSettingOnStandard as e:
            raise _fifo_setting(e) from None
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
        return ok(self.ctx.queue_json(await self.ctx.queue(request)))

    async def update(self, request: web.Request) -> web.Response:
        """PUT: the settings are replaced as a whole; absent ones go back to defaults."""
        return await self._change(request, full=True)

    async def edit(self, request: web.Request) -> web.Response:
        return await self._change(request, full=False)

    async def _change(self, request: web.Request, full: bool) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request), known=("queue_name", "settings", "jurisdiction"))
        name = _queue_name(f, required=False)
        _settings(f, QueueSettings())  # a bad body is refused before anything is read
        # PUT replaces the settings; PATCH merges the body into them as they are when the
        # change is made, not as they were when the request arrived.
        try:
            q = await self.admin.change_queue(
                q, lambda current: _settings(f, QueueSettings() if full else current), name
            )
        except QueueExists as e:
            raise _exists(e) from None
        except QueueInUse as e:
            raise _in_use(e) from None
        except QueueTypeChange as e:
            raise invalid(str(e), "/queue_name") from None
        except FifoSettingOnStandard as e:
            raise _fifo_setting(e) from None
        return ok(self.ctx.queue_json(q))

    async def delete(self, request: web.Request) -> web.Response:
        try:
            await self.admin.delete_queue(await self.ctx.queue(request))
        except QueueInUse as e:
            raise _in_use(e) from None
        return ok(None)

    async def metrics(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        b = await self.ctx.store.backlog(q)
        c = queue_counts(b.count, (await self.ctx.store.queue_stats(self.ctx.clock())).get(q.key))
        return ok(
            {
                "backlog_count": b.count,
                "backlog_bytes": b.bytes,
                "oldest_message_timestamp_ms": b.oldest_ms,
                "ready_count": c.ready,
                "delayed_count": c.delayed,
                "inflight_count": c.in_flight,
            }
        )

    async def purge(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(
            await json_object(request, optional=True), known=("delete_messages_permanently",)
        )
        if f.boolean("delete_messages_permanently", False) is not True:
            raise invalid(
                "purging deletes every message of the queue; send "
                '{"delete_messages_permanently": true} to confirm',
                "/delete_messages_permanently",
            )
        return ok(self.ctx.queue_json(await self.admin.purge(q)))

    async def purge_status(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        # A purge completes inside its request, so the last one is always complete.
        return ok(
            {
                "started_at": iso(q.purged_ms),
                "completed": "true" if q.purged_ms is not None else "false",
            }
        )

    # ---------------------------------------------------------------- consumers

    async def list_consumers(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        c = self.ctx.consumer_json(q)
        return ok([] if c is None else [c])

    async def _consumer(self, request: web.Request) -> tuple[QueueRecord, dict[str, Any]]:
        q = await self.ctx.queue(request)
        c = self.ctx.consumer_json(q)
        if c is None or c["consumer_id"] != request.match_info["consumer_id"]:
            raise ApiError(404, CONSUMER_NOT_FOUND, "Consumer not found")
        return q, c

    async def get_consumer(self, request: web.Request) -> web.Response:
        return ok((await self._consumer(request))[1])

    async def create_consumer(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        consumer = await self._consumer_input(request, q)
        try:
            stored = await self.admin.create_consumer(q, consumer)
        except ConsumerExists as e:
            raise ApiError(409, CONSUMER_EXISTS, str(e)) from None
        except DeadLetterTypeMismatch as e:
            raise invalid(str(e), "/dead_letter_queue") from None
        return ok(self._consumer_json(q, stored))

    async def update_consumer(self, request: web.Request) -> web.Response:
        """PUT updates the pull consumer, or creates it ("updates or creates")."""
        q = await self.ctx.queue(request)
        consumer = await self._consumer_input(request, q)
        try:
            stored = await self.admin.put_consumer(q, consumer, request.match_info["consumer_id"])
        except ConsumerInConfig:
            raise _worker_consumer_refused() from None
        except ConsumerNotFound as e:
            raise ApiError(404, CONSUMER_NOT_FOUND, str(e)) from None
        except DeadLetterTypeMismatch as e:
            raise invalid(str(e), "/dead_letter_queue") from None
        return ok(self._consumer_json(q, stored))

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
            s.integer("visibility_timeout_ms", *limits.VISIBILITY_MS, limits.VISIBILITY_DEFAULT_MS),
            s.integer("retry_delay", *limits.DELAY_S, 0),
        )

    def _consumer_json(self, q: QueueRecord, stored: PullConsumer) -> dict[str, Any]:
        # The queue's name as it is now: it may have been renamed while the consumer was put.
        return pull_consumer_json(self.ctx.store.queue_by_id(q.queue_id) or q, stored)

    async def delete_consumer(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        try:
            await self.admin.delete_consumer(q, request.match_info["consumer_id"])
        except ConsumerNotFound as e:
            raise ApiError(404, CONSUMER_NOT_FOUND, str(e)) from None
        except QueueInUse as e:  # its consumer is a worker of the config file
            raise _in_use(e) from None
        return ok(None)


def _exists(e: QueueExists) -> ApiError:
    return ApiError(409, QUEUE_EXISTS, str(e))


def _in_use(e: QueueInUse) -> ApiError:
    return ApiError(409, QUEUE_IN_USE, str(e))


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
