"""The SQS message actions: send, receive, delete and change visibility, single and batch.
Sends go through ``Producer``, receives, deletes and visibility changes through
``PullService``."""

from __future__ import annotations

import base64
from typing import Any, NamedTuple

from ocd.errors import QueueNotFound, QueueSendError
from ocd.http.sqs import message_attributes as ma
from ocd.http.sqs import queue_extras as qx
from ocd.http.sqs import queues as q
from ocd.http.sqs.context import Call, SqsContext, entries, failed, integer, string
from ocd.http.sqs.errors import SqsError, invalid, missing, no_queue
from ocd.http.sqs.md5 import md5_hex, md5_of_attributes
from ocd.store import Delivery, QueueRecord

MAX_BATCH_BYTES = q.MAX_MESSAGE_BYTES  # a whole batch; the producer's own limits apply too
MAX_WAIT_S = 20
SYSTEM_ATTRIBUTES = (
    "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
)  # fmt: skip
CONTENT_TYPE_ATTRIBUTE = "ocd.contentType"


class Outgoing(NamedTuple):
    """One message to send, checked: the producer's item and its attributes."""

    item: tuple[Any, ...]  # (body, content type, delay, group, dedup)
    attrs: ma.Parsed

    @property
    def size(self) -> int:
        return len(self.item[0].encode()) + self.attrs.size


def _check_send(
    queue: QueueRecord, entry: dict[str, Any], max_bytes: int, in_batch: bool = False
) -> Outgoing:
    body = entry.get("MessageBody")
    if body is None:
        raise missing("MessageBody")
    if not isinstance(body, str) or not body:
        raise invalid("The request must contain a non-empty message body.")
    if ma.BAD_CHARS.search(body):
        raise SqsError(
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
            "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    attrs = ma.parse(entry)
    # attributes (names, types and values) count toward the message size, as on SQS
    if len(body.encode()) + attrs.size > max_bytes:
        raise too_long(max_bytes, in_batch)
    delay = integer(
        entry,
        "DelaySeconds",
        0,
        q.MAX_DELAY_S,
        None,
        reason=f"DelaySeconds must be >= 0 and <= {q.MAX_DELAY_S}.",
    )
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
    return Outgoing((body, "text", delay, group if queue.fifo else None, dedup), attrs)


def too_long(max_bytes: int, in_batch: bool = False) -> SqsError:
    """A message over ``max_bytes``, in SQS's words (which differ inside a batch)."""
    verb = "cannot be validated" if in_batch else "are invalid"
    return invalid(
        f"One or more parameters {verb}. Reason: Message must be shorter than {max_bytes} bytes."
    )


def _check_fifo_batch(queue: QueueRecord, batch: list[dict[str, Any]]) -> None:
    """What SQS refuses for a whole FIFO batch rather than for the entry: an entry without
    a group, or without a deduplication id where the queue does not derive one."""
    if not queue.fifo:
        return
    for e in batch:
        if e.get("MessageGroupId") is None:
            raise missing("MessageGroupId")  # as SendMessage answers it
        if e.get("MessageDeduplicationId") is None and not (
            queue.settings.content_based_deduplication
        ):
            raise invalid(
                "The queue should either have ContentBasedDeduplication enabled or "
                "MessageDeduplicationId provided explicitly"
            )


async def _send(sqs: SqsContext, queue: QueueRecord, out: list[Outgoing]) -> list[dict[str, Any]]:
    items = [o.item for o in out]
    blobs = [o.attrs.blob for o in out]
    try:
        _, ids, sent = await sqs.producer.send_with_ids(
            queue,
            items,
            attrs=blobs if any(blobs) else None,
            # SQS's limits (checked above against the queue's MaximumMessageSize), not the
            # Workers binding's 128 KB
            max_message_bytes=q.MAX_MESSAGE_BYTES,
            max_batch_bytes=MAX_BATCH_BYTES,
        )
    except QueueSendError as e:
        raise invalid(e.cause) from None
    except QueueNotFound:
        raise no_queue() from None
    results = []
    for i, o in enumerate(out):
        r: dict[str, Any] = {
            "MD5OfMessageBody": md5_hex(o.item[0].encode()),
            "MessageId": _uuid(ids[i]),
            **o.attrs.md5s(),
        }
        if sent is not None:
            r["MessageId"] = _uuid(sent[i].id)
            r["SequenceNumber"] = f"{sent[i].sequence:020d}"
        results.append(r)
    return results


async def send_message(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    max_bytes = qx.max_message_bytes(await sqs.extras(queue))
    item = _check_send(queue, call.params, max_bytes)
    (r,) = await _send(sqs, queue, [item])
    return r


async def send_message_batch(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    batch = entries(call.params, "SendMessageBatch")
    _check_fifo_batch(queue, batch)
    max_bytes = qx.max_message_bytes(await sqs.extras(queue))
    good: list[tuple[str, Outgoing]] = []
    bad: list[dict[str, Any]] = []
    total = 0
    for e in batch:
        try:
            o = _check_send(queue, e, max_bytes, in_batch=True)
        except SqsError as err:
            bad.append(failed(e["Id"], err))
            total += len(str(e.get("MessageBody", "")).encode())
            continue
        good.append((e["Id"], o))
        total += o.size
    if total > MAX_BATCH_BYTES:
        raise SqsError(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent "
            f"{total} bytes.",
        )
    out: dict[str, Any] = {}
    if good:
        results = await _send(sqs, queue, [o for _, o in good])
        out["Successful"] = [{"Id": i, **r} for (i, _), r in zip(good, results, strict=True)]
    if bad:
        out["Failed"] = bad
    return out


async def receive_message(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    queue = await sqs.queue(call)
    limit = integer(req, "MaxNumberOfMessages", 1, 10, 1) or 1
    default_wait = qx.wait_s(await sqs.extras(queue))
    wait_s = (
        integer(
            req,
            "WaitTimeSeconds",
            0,
            MAX_WAIT_S,
            default_wait,
            reason=f"Must be >= 0 and <= {MAX_WAIT_S}, if provided.",
        )
        or 0
    )
    consumer = sqs.consumer(queue)
    vis_s = integer(req, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, None)
    vis_ms = consumer.visibility_timeout_ms if vis_s is None else max(vis_s * 1000, 1)
    names = set(req.get("AttributeNames") or []) | set(req.get("MessageSystemAttributeNames") or [])
    wanted_attrs = set(SYSTEM_ATTRIBUTES) if "All" in names else names
    msg_names = req.get("MessageAttributeNames") or []
    if not isinstance(msg_names, list) or not all(isinstance(n, str) for n in msg_names):
        raise invalid("MessageAttributeNames must be a list of names.")
    pulled = await sqs.pull.pull(queue, consumer, limit, vis_ms, wait_s * 1000, metrics=False)
    if not pulled.deliveries:
        return {}
    return {
        "Messages": [
            _message(sqs, queue, d, wanted_attrs, msg_names, call.caller.account_id)
            for d in pulled.deliveries
        ]
    }


def _message(
    sqs: SqsContext,
    queue: QueueRecord,
    d: Delivery,
    wanted: set[str],
    msg_names: list[str],
    sender: str,
) -> dict[str, Any]:
    body, ctype_attr = sqs_body(d)
    m: dict[str, Any] = {
        "MessageId": _uuid(d.id),
        "ReceiptHandle": sqs.pull.lease_id(queue, d),
        # a text body is the stored bytes themselves: no need to encode it again
        "MD5OfBody": md5_hex(d.body if ctype_attr is None else body.encode()),
        "Body": body,
    }
    if not (wanted or msg_names):
        return m  # the common receive: no attribute asked for, none to load or hash
    user, sent_system = ma.load(d.attrs)
    if wanted:
        attrs = {k: v for k, v in _system(d, sender, sent_system).items() if k in wanted}
        if attrs:
            m["Attributes"] = attrs
    if ctype_attr is not None:
        user[CONTENT_TYPE_ATTRIBUTE] = {"DataType": "String", "StringValue": ctype_attr}
    # the MD5 covers the attributes returned, not all that were sent (as SQS and the SDKs)
    mattrs = {k: v for k, v in user.items() if ma.wanted(msg_names, k)}
    if mattrs:
        m["MessageAttributes"] = mattrs
        m["MD5OfMessageAttributes"] = md5_of_attributes(mattrs)
    return m


def _system(d: Delivery, sender: str, sent_system: ma.Attributes) -> dict[str, str]:
    """Every system attribute the message has, in SQS's order."""
    system = {
        "SenderId": sender,
        "SentTimestamp": str(d.sent_ms),
        "ApproximateReceiveCount": str(d.attempts),
    }
    if d.first_received_ms is not None:
        system["ApproximateFirstReceiveTimestamp"] = str(d.first_received_ms)
    if d.group is not None:
        system["MessageGroupId"] = d.group
    if d.sequence is not None:
        system["SequenceNumber"] = f"{d.sequence:020d}"
    if d.dedup is not None:
        system["MessageDeduplicationId"] = d.dedup
    trace = sent_system.get("AWSTraceHeader")
    if trace is not None and "StringValue" in trace:
        system["AWSTraceHeader"] = trace["StringValue"]
    return system


async def _delete(sqs: SqsContext, queue: QueueRecord, handles: list[str]) -> dict[str, str]:
    try:
        result = await sqs.pull.ack(queue, sqs.consumer(queue), handles, [])
    except QueueNotFound:
        raise no_queue() from None
    return result.warnings


async def delete_message(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    handle = string(call.params, "ReceiptHandle")
    if await _delete(sqs, queue, [handle]):
        raise _bad_handle(handle)
    return {}


async def delete_message_batch(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    batch = entries(call.params, "DeleteMessageBatch")
    handles = [str(e.get("ReceiptHandle", "")) for e in batch]
    warnings = await _delete(sqs, queue, handles)
    pairs = list(zip(batch, handles, strict=True))
    ok = [{"Id": e["Id"]} for e, h in pairs if h not in warnings]
    bad = [failed(e["Id"], _bad_handle(h)) for e, h in pairs if h in warnings]
    out: dict[str, Any] = {}
    if ok:
        out["Successful"] = ok
    if bad:
        out["Failed"] = bad
    return out


async def change_message_visibility(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    queue = await sqs.queue(call)
    handle = string(req, "ReceiptHandle")
    if req.get("VisibilityTimeout") is None:
        raise missing("VisibilityTimeout")
    vis = integer(req, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, 0) or 0
    if await sqs.pull.change_visibility(queue, [(handle, vis * 1000)]):
        raise _bad_handle(handle)
    return {}


async def change_message_visibility_batch(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    batch = entries(call.params, "ChangeMessageVisibilityBatch")
    changes: list[tuple[str, int]] = []
    bad: list[dict[str, Any]] = []
    ok: list[dict[str, Any]] = []
    for e in batch:
        try:
            vis = integer(e, "VisibilityTimeout", 0, q.MAX_VISIBILITY_S, 0) or 0
        except SqsError as err:
            bad.append(failed(e["Id"], err))
            continue
        changes.append((str(e.get("ReceiptHandle", "")), vis * 1000))
        ok.append({"Id": e["Id"]})
    stale = await sqs.pull.change_visibility(queue, changes)
    pairs = list(zip(ok, changes, strict=True))
    good = [o for o, (h, _) in pairs if h not in stale]
    bad += [failed(o["Id"], _bad_handle(h)) for o, (h, _) in pairs if h in stale]
    out: dict[str, Any] = {}
    if good:
        out["Successful"] = good
    if bad:
        out["Failed"] = bad
    return out


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
