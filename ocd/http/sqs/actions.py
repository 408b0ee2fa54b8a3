"""The SQS actions, on ocd's domain operations (producer, pull, admin, store reads).

Each action takes the request as a dict of JSON member names and returns the response
dict; errors are :class:`~ocd.http.sqs.errors.SqsError`. No SQL and nothing of the
Cloudflare surface: sends go through ``Producer``, receives and acks through
``PullService``, queue administration through ``Admin``.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from ocd.admin import Admin, check_dead_letter
from ocd.clock import Clock
from ocd.errors import (
    ConsumerInConfig,
    DeadLetterTypeMismatch,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    QueueSendError,
)
from ocd.http.sqs import moves
from ocd.http.sqs import queues as q
from ocd.http.sqs.errors import SqsError, invalid, missing, no_queue
from ocd.http.sqs.md5 import md5_hex, md5_of_attributes
from ocd.producer import Producer
from ocd.pull import PullService
from ocd.store import Delivery, PullConsumer, QueueRecord, QueueSettings, Store

MAX_BATCH = 10
MAX_BODY_BYTES = 262_144  # the producer's own limit applies too
MAX_WAIT_S = 20
PURGE_INTERVAL_MS = 60_000
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
# SQS's allowed body characters: #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000+
_BAD_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SYSTEM_ATTRIBUTES = (
    "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageDeduplicationId", "MessageGroupId",
)  # fmt: skip
CONTENT_TYPE_ATTRIBUTE = "ocd.contentType"


@dataclass
class SqsContext:
    store: Store
    producer: Producer
    pull: PullService
    admin: Admin
    clock: Clock
    region: str
    public_url: str | None = None


Action = Callable[["Actions", dict[str, Any], str], Awaitable[dict[str, Any]]]


def _str(req: dict[str, Any], key: str, required: bool = True) -> Any:
    value = req.get(key)
    if value is None and required:
        raise missing(key)
    if value is not None and not isinstance(value, str):
        raise invalid(f"Value for parameter {key} is invalid. Reason: must be a string.")
    return value


def _int(req: dict[str, Any], key: str, lo: int, hi: int, default: int | None) -> int | None:
    value = req.get(key)
    if value is None:
        return default
    try:
        n = int(value) if not isinstance(value, bool) else lo - 1
    except (TypeError, ValueError):
        n = lo - 1
    if not lo <= n <= hi:
        raise invalid(
            f"Value {value} for parameter {key} is invalid. Reason: Must be between {lo} and "
            f"{hi}, if provided."
        )
    return n


def _entries(req: dict[str, Any]) -> list[dict[str, Any]]:
    entries = req.get("Entries")
    if not entries:
        raise SqsError(
            "EmptyBatchRequest",
            "There should be at least one SendMessageBatchRequestEntry in the request.",
        )
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise invalid("Entries must be a list of entries")
    if len(entries) > MAX_BATCH:
        raise SqsError(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(entries)}.",
        )
    seen: set[str] = set()
    for e in entries:
        i = e.get("Id")
        if not isinstance(i, str) or not _BATCH_ID.fullmatch(i):
            raise SqsError(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                "underscores. It can be at most 80 letters long.",
            )
        if i in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {i} repeated.")
        seen.add(i)
    return entries


def _failed(entry_id: str, e: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": True, "Code": e.query_code, "Message": e.message}


class Actions:
    def __init__(self, ctx: SqsContext) -> None:
        self.ctx = ctx
        self._purges: dict[str, int] = {}  # queue id -> when this node last purged it

    # ------------------------------------------------------------ helpers

    def url(self, base: str, queue: QueueRecord) -> str:
        return f"{self.ctx.public_url or base}/{q.LOCAL_ACCOUNT_ID}/{queue.name}"

    async def _queue(self, req: dict[str, Any]) -> QueueRecord:
        account, name = q.queue_name_of(req.get("QueueUrl"))
        found = await self.ctx.store.lookup(name, account)
        if found is None:
            raise no_queue()
        return found

    def _consumer(self, queue: QueueRecord) -> PullConsumer:
        found = self.ctx.store.pull_consumer(queue)
        if found is not None:
            return found
        return PullConsumer(
            queue.key, "", 0, None, 10, q.UNLIMITED_RECEIVES, q.DEFAULT_VISIBILITY_S * 1000
        )

    async def _apply_consumer(self, queue: QueueRecord, wanted: q.Wanted) -> None:
        """VisibilityTimeout and RedrivePolicy live in the queue's pull consumer."""
        if wanted.visibility_s is None and wanted.redrive is None and not wanted.redrive_cleared:
            return
        current = self.ctx.store.pull_consumer(queue)
        consumer = current or PullConsumer(
            queue.key,
            secrets.token_hex(16),
            self.ctx.clock(),
            None,
            10,
            q.UNLIMITED_RECEIVES,
            q.DEFAULT_VISIBILITY_S * 1000,
        )
        if wanted.visibility_s is not None:
            # ocd leases last at least a millisecond; SQS's 0 means "visible again at once"
            consumer = replace(consumer, visibility_timeout_ms=max(wanted.visibility_s * 1000, 1))
        if wanted.redrive is not None:
            dlq, count = wanted.redrive
            if await self.ctx.store.lookup(dlq, queue.account) is None:
                raise SqsError(
                    "InvalidParameterValueException",
                    "Value for parameter RedrivePolicy is invalid. Reason: Dead letter target "
                    "does not exist.",
                )
            try:
                check_dead_letter(queue.name, dlq)
            except DeadLetterTypeMismatch:
                raise SqsError(
                    "InvalidParameterValueException",
                    "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter queue "
                    "must be same type of queue as the source.",
                ) from None
            consumer = replace(consumer, dead_letter_queue=dlq, max_retries=count - 1)
        elif wanted.redrive_cleared:
            consumer = replace(consumer, dead_letter_queue=None, max_retries=q.UNLIMITED_RECEIVES)
        try:
            await self.ctx.admin.put_consumer(queue, consumer)
        except ConsumerInConfig as e:
            raise SqsError(
                "InvalidAttributeValue",
                f"Queue {queue.name} is consumed by worker {e.worker} in the ocd config file; "
                "its visibility timeout and redrive policy are set there.",
            ) from None

    # ------------------------------------------------------------ queues

    async def CreateQueue(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        name = q.check_name(_str(req, "QueueName"))
        attrs = req.get("Attributes") or {}
        if isinstance(attrs, dict) and str(attrs.get("FifoQueue", "")).lower() == "true":
            if not name.endswith(".fifo"):
                raise SqsError(
                    "InvalidParameterValueException",
                    "The name of a FIFO queue can only include alphanumeric characters, "
                    "hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.",
                )
        if req.get("tags"):
            raise SqsError("UnsupportedOperation", "ocd does not keep queue tags yet.")
        wanted = q.parse_attributes(name, attrs, QueueSettings(), creating=True)
        existing = await self.ctx.store.lookup(name, "local")
        if existing is not None:
            self._same(existing, wanted)
            return {"QueueUrl": self.url(base, existing)}
        try:
            queue = await self.ctx.admin.create_queue("local", name, wanted.settings)
        except QueueExists:  # made by another request a moment ago
            made = await self.ctx.store.lookup(name, "local")
            if made is None:
                raise no_queue() from None
            self._same(made, wanted)
            return {"QueueUrl": self.url(base, made)}
        try:
            await self._apply_consumer(queue, wanted)
        except SqsError:
            await self.ctx.admin.delete_queue(queue)
            raise
        return {"QueueUrl": self.url(base, queue)}

    def _same(self, queue: QueueRecord, wanted: q.Wanted) -> None:
        vis, redrive = q.consumer_view(self.ctx.store.pull_consumer(queue))
        differs = [
            n
            for n, same in (
                (
                    "DelaySeconds",
                    queue.settings.delivery_delay_s == wanted.settings.delivery_delay_s,
                ),
                (
                    "MessageRetentionPeriod",
                    queue.settings.message_retention_period_s
                    == wanted.settings.message_retention_period_s,
                ),
                (
                    "ContentBasedDeduplication",
                    queue.settings.content_based_deduplication
                    == wanted.settings.content_based_deduplication,
                ),
                ("VisibilityTimeout", wanted.visibility_s in (None, vis)),
                ("RedrivePolicy", wanted.redrive in (None, redrive)),
            )
            if not same
        ]
        if differs:
            raise SqsError(
                "QueueNameExists",
                "A queue already exists with the same name and a different value for "
                f"attribute {differs[0]}",
            )

    async def GetQueueUrl(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        name = _str(req, "QueueName")
        owner = req.get("QueueOwnerAWSAccountId")
        if owner is not None and owner not in q.ACCOUNTS:
            raise no_queue()
        found = await self.ctx.store.lookup(name, "local")
        if found is None:
            raise no_queue()
        return {"QueueUrl": self.url(base, found)}

    async def ListQueues(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        prefix = _str(req, "QueueNamePrefix", required=False) or ""
        limit = _int(req, "MaxResults", 1, 1000, None)
        token = _str(req, "NextToken", required=False)
        names = sorted(
            x.name
            for x in self.ctx.store.queues()
            if x.account == "local" and x.name.startswith(prefix)
        )
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except ValueError:
                raise invalid("Invalid NextToken") from None
            names = [n for n in names if n > after]
        out: dict[str, Any] = {}
        page = names[: limit or 1000]
        if page:
            out["QueueUrls"] = [
                f"{self.ctx.public_url or base}/{q.LOCAL_ACCOUNT_ID}/{n}" for n in page
            ]
        if limit is not None and len(names) > limit:
            out["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
        return out

    async def DeleteQueue(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        try:
            await self.ctx.admin.delete_queue(queue)
        except QueueInUse as e:
            raise SqsError("InvalidParameterValueException", str(e)) from None
        except QueueNotFound:
            raise no_queue() from None
        return {}

    async def GetQueueAttributes(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        names = req.get("AttributeNames") or []
        if not isinstance(names, list):
            raise invalid("AttributeNames must be a list")
        for n in names:
            if n != "All" and n not in q.ALL_ATTRIBUTES:
                raise SqsError("InvalidAttributeName", f"Unknown Attribute {n}.")
        wanted = set(q.ALL_ATTRIBUTES) if "All" in names else set(names)
        if not wanted:
            return {}
        attrs = await self._attributes(queue)
        out = {k: v for k, v in attrs.items() if k in wanted}
        return {"Attributes": out} if out else {}

    async def _attributes(self, queue: QueueRecord) -> dict[str, str]:
        s = queue.settings
        vis, redrive = q.consumer_view(self.ctx.store.pull_consumer(queue))
        now = self.ctx.clock()
        backlog = await self.ctx.store.backlog(queue)
        stats = (await self.ctx.store.queue_stats(now)).get(queue.key)
        not_ready, leased = (stats.not_ready, stats.leased) if stats else (0, 0)
        attrs = {
            "QueueArn": q.arn(self.ctx.region, queue),
            "ApproximateNumberOfMessages": str(max(backlog.count - not_ready, 0)),
            "ApproximateNumberOfMessagesNotVisible": str(leased),
            "ApproximateNumberOfMessagesDelayed": str(max(not_ready - leased, 0)),
            "CreatedTimestamp": str(queue.created_ms // 1000),
            "LastModifiedTimestamp": str(queue.modified_ms // 1000),
            "VisibilityTimeout": str(vis),
            "MaximumMessageSize": q.FIXED["MaximumMessageSize"],
            "MessageRetentionPeriod": str(s.message_retention_period_s),
            "DelaySeconds": str(s.delivery_delay_s),
            "ReceiveMessageWaitTimeSeconds": q.FIXED["ReceiveMessageWaitTimeSeconds"],
            "SqsManagedSseEnabled": "false",
        }
        if redrive is not None:
            dlq = self.ctx.store.queue(redrive[0], queue.account)
            target = (
                q.arn(self.ctx.region, dlq)
                if dlq is not None
                else f"arn:aws:sqs:{self.ctx.region}:{q.LOCAL_ACCOUNT_ID}:{redrive[0]}"
            )
            attrs["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target, "maxReceiveCount": redrive[1]},
                separators=(",", ":"),
            )
        if queue.fifo:
            attrs["FifoQueue"] = "true"
            attrs["ContentBasedDeduplication"] = str(s.content_based_deduplication).lower()
            attrs["DeduplicationScope"] = (
                "messageGroup" if s.deduplication_scope == "message_group" else "queue"
            )
            attrs["FifoThroughputLimit"] = q.FIXED["FifoThroughputLimit"]
        return attrs

    async def SetQueueAttributes(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        if req.get("Attributes") is None:
            raise missing("Attributes")
        wanted = q.parse_attributes(queue.name, req["Attributes"], queue.settings, creating=False)
        try:
            if wanted.settings != queue.settings:
                queue = await self.ctx.admin.change_queue(queue, wanted.settings)
            await self._apply_consumer(queue, wanted)
        except QueueNotFound:
            raise no_queue() from None
        return {}

    async def PurgeQueue(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        now = self.ctx.clock()
        last = queue.purged_ms or self._purges.get(queue.queue_id)
        if last is not None and now - last < PURGE_INTERVAL_MS:
            raise SqsError(
                "PurgeQueueInProgress",
                f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds.",
            )
        self._purges[queue.queue_id] = now
        await self.ctx.admin.purge(queue)
        return {}

    async def ListDeadLetterSourceQueues(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        dlq = await self._queue(req)
        limit = _int(req, "MaxResults", 1, 1000, None)
        token = _str(req, "NextToken", required=False)
        sources = []
        for other in self.ctx.store.queues():
            if other.account != dlq.account:
                continue
            _, redrive = q.consumer_view(self.ctx.store.pull_consumer(other))
            if redrive is not None and redrive[0] == dlq.name:
                sources.append(other.name)
        sources.sort()
        if token:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            sources = [n for n in sources if n > after]
        page = sources[: limit or 1000]
        out: dict[str, Any] = {
            "queueUrls": [f"{self.ctx.public_url or base}/{q.LOCAL_ACCOUNT_ID}/{n}" for n in page]
        }
        if limit is not None and len(sources) > limit:
            out["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
        return out

    # ------------------------------------------------------------ messages

    def _check_send(self, queue: QueueRecord, entry: dict[str, Any]) -> tuple[Any, ...]:
        body = entry.get("MessageBody")
        if body is None:
            raise missing("MessageBody")
        if not isinstance(body, str) or not body:
            raise invalid("The request must contain a non-empty message body.")
        if _BAD_CHARS.search(body):
            raise SqsError(
                "InvalidMessageContents",
                "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
                "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
            )
        if len(body.encode()) > MAX_BODY_BYTES:
            raise invalid(
                "One or more parameters are invalid. Reason: Message must be shorter than "
                f"{MAX_BODY_BYTES} bytes."
            )
        if entry.get("MessageAttributes") or entry.get("MessageSystemAttributes"):
            raise SqsError("UnsupportedOperation", "ocd does not keep message attributes yet.")
        delay = _int(entry, "DelaySeconds", 0, q.MAX_DELAY_S, None)
        group = entry.get("MessageGroupId")
        dedup = entry.get("MessageDeduplicationId")
        if queue.fifo:
            if delay:
                raise invalid(
                    f"Value {delay} for parameter DelaySeconds is invalid. Reason: The request "
                    "include parameter that is not valid for this queue type."
                )
            if group is None:
                raise missing("MessageGroupId")
            if dedup is None and not queue.settings.content_based_deduplication:
                raise invalid(
                    "The queue should either have ContentBasedDeduplication enabled or "
                    "MessageDeduplicationId provided explicitly"
                )
            delay = None
        elif dedup is not None:
            raise invalid(
                "Value for parameter MessageDeduplicationId is invalid. Reason: The request "
                "includes a parameter that is not valid for this queue type."
            )
        # A message group id on a standard queue is accepted by SQS (fair queues) and ignored
        return (body, "text", delay, group if queue.fifo else None, dedup)

    async def SendMessage(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        item = self._check_send(queue, req)
        (r,) = await self._send_with_ids(queue, [item])
        return r

    async def _send_with_ids(
        self, queue: QueueRecord, items: list[tuple[Any, ...]]
    ) -> list[dict[str, Any]]:
        try:
            _, ids, sent = await self.ctx.producer.send_with_ids(queue, items)
        except QueueSendError as e:
            raise invalid(e.cause) from None
        except QueueNotFound:
            raise no_queue() from None
        results = []
        for i, item in enumerate(items):
            r: dict[str, Any] = {
                "MD5OfMessageBody": md5_hex(item[0].encode()),
                "MessageId": _uuid(ids[i]),
            }
            if sent is not None:
                r["MessageId"] = _uuid(sent[i].id)
                r["SequenceNumber"] = f"{sent[i].sequence:020d}"
            results.append(r)
        return results

    async def SendMessageBatch(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        entries = _entries(req)
        total = sum(len(str(e.get("MessageBody", "")).encode()) for e in entries)
        if total > MAX_BODY_BYTES:
            raise SqsError(
                "BatchRequestTooLong",
                f"Batch requests cannot be longer than {MAX_BODY_BYTES} bytes. You have sent "
                f"{total} bytes.",
            )
        good: list[tuple[str, tuple[Any, ...]]] = []
        failed: list[dict[str, Any]] = []
        for e in entries:
            try:
                good.append((e["Id"], self._check_send(queue, e)))
            except SqsError as err:
                failed.append(_failed(e["Id"], err))
        out: dict[str, Any] = {}
        if good:
            results = await self._send_with_ids(queue, [item for _, item in good])
            out["Successful"] = [{"Id": i, **r} for (i, _), r in zip(good, results, strict=True)]
        if failed:
            out["Failed"] = failed
        return out

    async def ReceiveMessage(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        limit = _int(req, "MaxNumberOfMessages", 1, MAX_BATCH, 1) or 1
        wait_s = _int(req, "WaitTimeSeconds", 0, MAX_WAIT_S, 0) or 0
        consumer = self._consumer(queue)
        vis_s = _int(req, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, None)
        vis_ms = consumer.visibility_timeout_ms if vis_s is None else max(vis_s * 1000, 1)
        names = set(req.get("AttributeNames") or []) | set(
            req.get("MessageSystemAttributeNames") or []
        )
        wanted_attrs = set(SYSTEM_ATTRIBUTES) if "All" in names else names
        msg_names = req.get("MessageAttributeNames") or []
        pulled = await self.ctx.pull.pull(queue, consumer, limit, vis_ms, wait_s * 1000)
        if not pulled.deliveries:
            return {}
        return {
            "Messages": [
                self._message(queue, d, wanted_attrs, msg_names) for d in pulled.deliveries
            ]
        }

    def _message(
        self, queue: QueueRecord, d: Delivery, wanted: set[str], msg_names: list[str]
    ) -> dict[str, Any]:
        body, ctype_attr = sqs_body(d)
        m: dict[str, Any] = {
            "MessageId": _uuid(d.id),
            "ReceiptHandle": self.ctx.pull.lease_id(queue, d),
            "MD5OfBody": md5_hex(body.encode()),
            "Body": body,
        }
        system = {
            "SenderId": q.LOCAL_ACCOUNT_ID,
            "SentTimestamp": str(d.sent_ms),
            "ApproximateReceiveCount": str(d.attempts),
        }
        if d.group is not None:
            system["MessageGroupId"] = d.group
        if d.sequence is not None:
            system["SequenceNumber"] = f"{d.sequence:020d}"
        if d.dedup is not None:
            system["MessageDeduplicationId"] = d.dedup
        attrs = {k: v for k, v in system.items() if k in wanted}
        if attrs:
            m["Attributes"] = attrs
        if ctype_attr is not None and _wants(msg_names, CONTENT_TYPE_ATTRIBUTE):
            mattrs = {CONTENT_TYPE_ATTRIBUTE: {"DataType": "String", "StringValue": ctype_attr}}
            m["MessageAttributes"] = mattrs
            m["MD5OfMessageAttributes"] = md5_of_attributes(mattrs)
        return m

    async def DeleteMessage(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        handle = _str(req, "ReceiptHandle")
        warnings = await self._delete(queue, [handle])
        if warnings:
            raise _bad_handle(handle)
        return {}

    async def _delete(self, queue: QueueRecord, handles: list[str]) -> dict[str, str]:
        try:
            result = await self.ctx.pull.ack(queue, self._consumer(queue), handles, [])
        except QueueNotFound:
            raise no_queue() from None
        return result.warnings

    async def DeleteMessageBatch(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        entries = _entries(req)
        handles = [str(e.get("ReceiptHandle", "")) for e in entries]
        warnings = await self._delete(queue, handles)
        ok = [{"Id": e["Id"]} for e, h in zip(entries, handles, strict=True) if h not in warnings]
        bad = [
            _failed(e["Id"], _bad_handle(h))
            for e, h in zip(entries, handles, strict=True)
            if h in warnings
        ]
        out: dict[str, Any] = {}
        if ok:
            out["Successful"] = ok
        if bad:
            out["Failed"] = bad
        return out

    async def ChangeMessageVisibility(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        handle = _str(req, "ReceiptHandle")
        if req.get("VisibilityTimeout") is None:
            raise missing("VisibilityTimeout")
        vis = _int(req, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, 0) or 0
        bad = await self.ctx.pull.change_visibility(queue, [(handle, vis * 1000)])
        if bad:
            raise _bad_handle(handle)
        return {}

    async def ChangeMessageVisibilityBatch(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        queue = await self._queue(req)
        entries = _entries(req)
        changes: list[tuple[str, int]] = []
        failed: list[dict[str, Any]] = []
        ok: list[dict[str, Any]] = []
        for e in entries:
            try:
                vis = _int(e, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, 0) or 0
            except SqsError as err:
                failed.append(_failed(e["Id"], err))
                continue
            changes.append((str(e.get("ReceiptHandle", "")), vis * 1000))
            ok.append({"Id": e["Id"]})
        bad = await self.ctx.pull.change_visibility(queue, changes)
        out: dict[str, Any] = {}
        good = [o for o, (h, _) in zip(ok, changes, strict=True) if h not in bad]
        failed += [
            _failed(o["Id"], _bad_handle(h))
            for o, (h, _) in zip(ok, changes, strict=True)
            if h in bad
        ]
        if good:
            out["Successful"] = good
        if failed:
            out["Failed"] = failed
        return out

    # ------------------------------------------------------------ not (yet) here

    async def _unsupported(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        raise SqsError("UnsupportedOperation", "This operation is not supported by ocd yet.")

    # Move tasks: ocd.http.sqs.moves; tags and permissions need per-queue storage ocd does
    # not have yet.
    StartMessageMoveTask = moves.StartMessageMoveTask
    ListMessageMoveTasks = moves.ListMessageMoveTasks
    CancelMessageMoveTask = moves.CancelMessageMoveTask
    TagQueue = _unsupported
    UntagQueue = _unsupported
    AddPermission = _unsupported
    RemovePermission = _unsupported

    async def ListQueueTags(self, req: dict[str, Any], base: str) -> dict[str, Any]:
        await self._queue(req)
        return {}


ACTION_NAMES = (
    "CreateQueue", "GetQueueUrl", "ListQueues", "DeleteQueue", "GetQueueAttributes",
    "SetQueueAttributes", "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage",
    "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
    "PurgeQueue", "TagQueue", "UntagQueue", "ListQueueTags", "ListDeadLetterSourceQueues",
    "StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask", "AddPermission",
    "RemovePermission",
)  # fmt: skip


def _wants(names: list[str], name: str) -> bool:
    for n in names:
        if n in ("All", ".*", name) or (n.endswith(".*") and name.startswith(n[:-1])):
            return True
    return False


def _uuid(hex32: str) -> str:
    """ocd's 32-hex message id in the UUID form SQS clients expect."""
    h = hex32
    if len(h) != 32:
        return h
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _bad_handle(handle: object) -> SqsError:
    return SqsError(
        "ReceiptHandleIsInvalid",
        f'The input receipt handle "{handle}" is not a valid receipt handle.',
    )


def sqs_body(d: Delivery) -> tuple[str, str | None]:
    """The SQS body of a stored message and, for binary ones, the ``ocd.contentType``
    attribute naming its Cloudflare content type."""
    if d.content_type in ("text", "json"):
        try:
            return d.body.decode("utf-8"), None
        except UnicodeDecodeError:
            pass
    return base64.b64encode(d.body).decode(), d.content_type
