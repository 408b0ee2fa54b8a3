"""Messages over HTTP: push, batch push, pull, ack/retry, peek, and purge of peeked ones.

Pushes go through the same producer the worker bindings use, so limits, codes and
atomicity are identical; pulls and acks go through ``ocd.pull``.
"""

from __future__ import annotations

import base64
from typing import Any

from aiohttp import web

from ocd import limits
from ocd.errors import QueueSendArgumentError, QueueSendError
from ocd.http.cloudflare.context import ApiContext
from ocd.http.cloudflare.envelope import (
    MESSAGE_METADATA_INVALID,
    NO_PULL_CONSUMER,
    QUEUE_DISABLED,
    ApiError,
    ApiRouter,
    invalid,
    ok,
)
from ocd.http.cloudflare.validate import Fields, json_object
from ocd.producer import MAX_BATCH_MESSAGES, check_delay
from ocd.pull import MAX_WAIT_MS
from ocd.store import Backlog, Delivery, PullConsumer, QueueRecord

REST_CONTENT_TYPES = ("json", "text")
MESSAGE_KEYS = (
    "body",
    "content_type",
    "delay_seconds",
    "message_group_id",
    "message_deduplication_id",
)


def metrics_json(b: Backlog) -> dict[str, int]:
    return {
        "backlog_count": b.count,
        "backlog_bytes": b.bytes,
        "oldest_message_timestamp_ms": b.oldest_ms,
    }


def sent_reply(b: Backlog) -> web.Response:
    """``ok({"metadata": {"metrics": metrics_json(b)}})``, formatted directly: a push's
    reply is the API's hot path, and building and serialising that dict costs more than the
    rest of the reply together (figures in docs/performance.md)."""
    body = (
        '{"success": true, "errors": [], "messages": [], "result": {"metadata": {"metrics": '
        f'{{"backlog_count": {b.count:d}, "backlog_bytes": {b.bytes:d}, '
        f'"oldest_message_timestamp_ms": {b.oldest_ms:d}}}}}}}}}'
    )
    return web.Response(body=body.encode(), content_type="application/json", charset="utf-8")


def body_json(d: Delivery) -> tuple[str, str]:
    """Pull/peek body encoding and the content type it is given as: text as a string; json,
    bytes and v8 as base64. A text body that is not UTF-8 (damage, another writer) goes out
    as its raw bytes, base64, typed ``bytes``: never altered, never an error."""
    if d.content_type == "text":
        try:
            return d.body.decode("utf-8"), "text"
        except UnicodeDecodeError:
            return base64.b64encode(d.body).decode(), "bytes"
    return base64.b64encode(d.body).decode(), d.content_type


def fifo_json(d: Delivery) -> dict[str, Any]:
    """A FIFO message's group, sequence number and deduplication id for a pull or peek
    reply; nothing for a standard queue's, whose replies stay exactly Cloudflare's."""
    if d.group is None:
        return {}
    return {
        "message_group_id": d.group,
        "sequence_number": d.sequence,
        "message_deduplication_id": d.dedup,
    }


def message_json(d: Delivery, handle: str, value: str) -> dict[str, Any]:
    """A pulled or peeked message; ``handle`` names its ``value``: "lease_id" or "ref"."""
    body, content_type = body_json(d)
    return {
        "id": d.id,
        "body": body,
        "attempts": d.attempts,
        "timestamp_ms": d.sent_ms,
        "metadata": {"CF-Content-Type": content_type},
        handle: value,
        **fifo_json(d),
    }


# The producer names a send's keys as the binding spells them; a REST client wrote these.
_REST_NAMES = (
    ("messageGroupId", "message_group_id"),
    ("messageDeduplicationId", "message_deduplication_id"),
    ("delaySeconds", "delay_seconds"),
)


def _rest_names(cause: str) -> str:
    for binding, rest in _REST_NAMES:
        cause = cause.replace(binding, rest)
    return cause


def _item(f: Fields) -> tuple[Any, str, int | None, str | None, str | None]:
    if "body" not in f:
        raise invalid('"body" is required', f.where("body"))
    ctype = f.string("content_type", "json")
    if ctype not in REST_CONTENT_TYPES:
        raise ApiError(
            400,
            MESSAGE_METADATA_INVALID,
            f'content_type must be "json" or "text" over HTTP, got "{ctype}"',
            f.where("content_type"),
        )
    body = f.data["body"]
    if ctype == "text" and not isinstance(body, str):
        raise invalid('a "text" message needs a string body', f.where("body"))
    group = f.string("message_group_id", None)
    dedup = f.string("message_deduplication_id", None)
    return body, ctype, _delay(f), group, dedup


def _delay(f: Fields) -> int | None:
    """``delay_seconds``, checked by the producer's rule: 10203 as on the binding."""
    value = f.data.get("delay_seconds")
    if isinstance(value, float) and value.is_integer():  # JSON has one number type
        value = int(value)
    try:
        return check_delay(value)
    except QueueSendError as e:
        raise ApiError(400, e.code, e.cause, f.where("delay_seconds")) from None


class MessageRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def add_to(self, router: ApiRouter, prefix: str = "") -> None:
        m = prefix + "/accounts/{account_id}/queues/{queue_id}/messages"
        router.add_post(m, self.push)
        router.add_post(m + "/batch", self.push_batch)
        router.add_post(m + "/pull", self.pull)
        router.add_post(m + "/ack", self.ack)
        router.add_post(m + "/peek", self.peek)
        router.add_post(m + "/purge", self.purge_refs)

    async def _send(self, q: QueueRecord, items: list[Any], delay: int | None) -> web.Response:
        try:
            backlog = await self.ctx.producer.send(q, items, delay)
        except QueueSendArgumentError as e:  # FIFO keys wrong for the queue
            raise ApiError(400, e.code, _rest_names(e.cause)) from None
        except QueueSendError as e:
            raise ApiError(400, e.code, e.cause) from None
        except TypeError as e:  # a body the content type cannot carry
            raise invalid(str(e)) from None
        return sent_reply(backlog)

    async def push(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request), known=MESSAGE_KEYS)
        return await self._send(q, [_item(f)], None)

    async def push_batch(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request), known=("messages", "delay_seconds"))
        raw = f.array("messages")
        if not raw:
            raise invalid("messages must hold at least one message", "/messages")
        if len(raw) > MAX_BATCH_MESSAGES:
            raise ApiError(
                400,
                10206,
                f"batch message count of {len(raw)} exceeds limit of {MAX_BATCH_MESSAGES}",
                "/messages",
            )
        items = [_item(Fields(m, f"/messages/{i}", MESSAGE_KEYS)) for i, m in enumerate(raw)]
        return await self._send(q, items, _delay(f))

    def _pull_consumer(self, q: QueueRecord) -> PullConsumer:
        consumer = self.ctx.store.pull_consumer(q)
        if consumer is None:
            raise ApiError(
                400,
                NO_PULL_CONSUMER,
                f"queue {q.name} has no HTTP pull consumer; add one first "
                f"(ocd queues consumer http add {q.name})",
            )
        return consumer

    async def pull(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(
            await json_object(request, optional=True),
            known=("batch_size", "visibility_timeout_ms", "visibility_timeout", "wait_ms"),
        )
        consumer = self._pull_consumer(q)
        batch_size = f.integer("batch_size", 1, 100, 5)
        visibility = f.integer("visibility_timeout_ms", *limits.VISIBILITY_MS, None)
        older = f.integer("visibility_timeout", *limits.VISIBILITY_MS, None)  # the older name
        if visibility is None:
            visibility = older if older is not None else consumer.visibility_timeout_ms
        wait_ms = f.integer("wait_ms", 0, MAX_WAIT_MS, 0)
        if q.settings.delivery_paused:
            raise ApiError(409, QUEUE_DISABLED, "queue_delivery_paused")
        pulled = await self.ctx.pull.pull(q, consumer, batch_size, visibility, wait_ms)
        notes = [
            f"message {d.id} has content type v8, which HTTP pull consumers cannot decode; "
            "it stays in the queue for a worker consumer"
            for d in pulled.refused
        ]
        messages = [
            message_json(d, "lease_id", self.ctx.pull.lease_id(q, d)) for d in pulled.deliveries
        ]
        return ok(
            {
                "message_backlog_count": pulled.backlog.count,
                "messages": messages,
                "metadata": {"metrics": metrics_json(pulled.backlog)},
            },
            messages=notes,
        )

    async def ack(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(
            await json_object(request, optional=True), known=("acks", "retries", "undecodable")
        )
        consumer = self._pull_consumer(q)
        acks = [
            Fields(a, f"/acks/{i}", ("lease_id",)).string("lease_id")
            for i, a in enumerate(f.array("acks", []))
        ]
        retries: list[tuple[str, int | None]] = []
        for i, r in enumerate(f.array("retries", [])):
            rf = Fields(r, f"/retries/{i}", ("lease_id", "delay_seconds"))
            retries.append((rf.string("lease_id"), _delay(rf)))
        undecodable: list[tuple[str, str]] = []
        for i, u in enumerate(f.array("undecodable", [])):
            uf = Fields(u, f"/undecodable/{i}", ("lease_id", "reason"))
            undecodable.append((uf.string("lease_id"), uf.string("reason", "not given")[:300]))
        result = await self.ctx.pull.ack(q, consumer, acks, retries, undecodable)
        return ok(
            {"ackCount": result.acked, "retryCount": result.retried, "warnings": result.warnings}
        )

    async def peek(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request, optional=True), known=("batch_size",))
        limit = f.integer("batch_size", 1, 100, 1)
        peeked = await self.ctx.store.peek(q, self.ctx.clock(), limit)
        return ok({"messages": [message_json(d, "ref", self.ctx.pull.ref(q, d)) for d in peeked]})

    async def purge_refs(self, request: web.Request) -> web.Response:
        q = await self.ctx.queue(request)
        f = Fields(await json_object(request), known=("refs",))
        refs = [
            Fields(r, f"/refs/{i}", ("ref",)).string("ref") for i, r in enumerate(f.array("refs"))
        ]
        warnings = await self.ctx.pull.purge_refs(q, refs)
        return ok({"errors": [], "warnings": warnings})
