"""The SQS queue actions: create, find, list, delete, attributes, purge, dead-letter
sources, tags and permissions. Queue administration goes through ``Admin``."""

from __future__ import annotations

import base64
from typing import Any

from ocd.errors import QueueExists, QueueInUse, QueueNotFound
from ocd.http.sqs import attributes
from ocd.http.sqs import queue_extras as qx
from ocd.http.sqs import queues as q
from ocd.http.sqs.context import Call, SqsContext, integer, string
from ocd.http.sqs.errors import SqsError, invalid, missing, no_queue
from ocd.store import QueueExtras, QueueRecord, QueueSettings

PURGE_INTERVAL_MS = 60_000


async def create_queue(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    name = q.check_name(string(req, "QueueName"))
    attrs = req.get("Attributes") or {}
    if isinstance(attrs, dict) and str(attrs.get("FifoQueue", "")).lower() == "true":
        if not name.endswith(".fifo"):
            raise SqsError(
                "InvalidParameterValueException",
                "The name of a FIFO queue can only include alphanumeric characters, "
                "hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.",
            )
    tags = qx.check_tags(name, req.get("tags") or {})
    wanted = q.parse_attributes(name, attrs, QueueSettings(), True, call.arn_prefix)
    existing = await sqs.store.lookup(name, call.account)
    if existing is not None:
        await attributes.check_same(sqs, existing, wanted)
        return {"QueueUrl": sqs.url(call, existing)}
    try:
        queue = await sqs.admin.create_queue(call.account, name, wanted.settings)
    except QueueExists:  # made by another request a moment ago
        made = await sqs.store.lookup(name, call.account)
        if made is None:
            raise no_queue() from None
        await attributes.check_same(sqs, made, wanted)
        return {"QueueUrl": sqs.url(call, made)}
    try:
        await attributes.apply_consumer(sqs, queue, wanted)
        if wanted.extras or tags:
            await qx.save(sqs, queue, QueueExtras(qx.merged({}, wanted.extras), tags))
    except SqsError:
        await sqs.admin.delete_queue(queue)
        raise
    return {"QueueUrl": sqs.url(call, queue)}


async def _save_extras(sqs: SqsContext, queue: QueueRecord, changes: dict[str, str]) -> None:
    if not changes:
        return
    ex = await sqs.extras(queue)
    await qx.save(sqs, queue, QueueExtras(qx.merged(ex.sqs_attrs, changes), ex.tags))


async def get_queue_url(sqs: SqsContext, call: Call) -> dict[str, Any]:
    name = string(call.params, "QueueName")
    owner = call.params.get("QueueOwnerAWSAccountId")
    if (owner is not None and owner != call.caller.account_id) or not q.is_name(name):
        raise no_queue()
    found = await sqs.store.lookup(name, call.account)
    if found is None:
        raise no_queue()
    return {"QueueUrl": sqs.url(call, found)}


def _page(sqs: SqsContext, call: Call, names: list[str], key: str, always: bool) -> dict[str, Any]:
    """A page of queue URLs from sorted ``names`` (MaxResults, NextToken: the last name)."""
    limit = integer(call.params, "MaxResults", 1, 1000, None)
    token = string(call.params, "NextToken", required=False)
    if token:
        after = _after(token)
        names = [n for n in names if n > after]
    page = names[: limit or 1000]
    out: dict[str, Any] = {}
    if page or always:
        out[key] = [sqs.url_of(call, n) for n in page]
    if limit is not None and len(names) > limit:
        out["NextToken"] = base64.urlsafe_b64encode(_TOKEN_MARK + page[-1].encode()).decode()
    return out


# A page token is the last name listed, marked so that a token this endpoint did not
# issue (another service's, a mangled one) is refused rather than read as a name.
_TOKEN_MARK = b"ocd-page:"


def _after(token: str) -> str:
    """The name a NextToken lists after; InvalidParameterValue for a foreign token."""
    try:
        raw = base64.b64decode(token.encode(), altchars=b"-_", validate=True)
        name = raw.removeprefix(_TOKEN_MARK).decode() if raw.startswith(_TOKEN_MARK) else ""
        return q.check_name(name)
    except (ValueError, SqsError):  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise invalid("Invalid NextToken") from None


async def list_queues(sqs: SqsContext, call: Call) -> dict[str, Any]:
    prefix = string(call.params, "QueueNamePrefix", required=False) or ""
    names = sorted(
        x.name
        for x in sqs.store.queues()
        if x.account == call.account and x.name.startswith(prefix)
    )
    return _page(sqs, call, names, "QueueUrls", always=False)


async def delete_queue(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    try:
        await sqs.admin.delete_queue(queue)
    except QueueInUse as e:
        raise SqsError("InvalidParameterValueException", str(e)) from None
    except QueueNotFound:
        raise no_queue() from None
    return {}


async def get_queue_attributes(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    names = call.params.get("AttributeNames") or []
    if not isinstance(names, list):
        raise invalid("AttributeNames must be a list")
    for n in names:
        if n != "All" and n not in q.ALL_ATTRIBUTES:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {n}.")
    wanted = set(q.ALL_ATTRIBUTES) if "All" in names else set(names)
    if not wanted:
        return {}
    attrs = await attributes.view(sqs, call, queue)
    out = {k: v for k, v in attrs.items() if k in wanted}
    return {"Attributes": out} if out else {}


async def set_queue_attributes(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    if call.params.get("Attributes") is None:
        raise missing("Attributes")
    wanted = q.parse_attributes(
        queue.name, call.params["Attributes"], queue.settings, False, call.arn_prefix
    )
    try:
        if wanted.settings != queue.settings:
            queue = await sqs.admin.change_queue(queue, wanted.settings)
        await attributes.apply_consumer(sqs, queue, wanted)
        await _save_extras(sqs, queue, wanted.extras)
    except QueueNotFound:
        raise no_queue() from None
    return {}


async def purge_queue(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    now = sqs.clock()
    last = queue.purged_ms or sqs.purges.get(queue.queue_id)
    if last is not None and now - last < PURGE_INTERVAL_MS:
        raise SqsError(
            "PurgeQueueInProgress",
            f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds.",
        )
    sqs.purges[queue.queue_id] = now
    await sqs.admin.purge(queue)
    return {}


async def list_dead_letter_source_queues(sqs: SqsContext, call: Call) -> dict[str, Any]:
    dlq = await sqs.queue(call)
    sources = []
    for other in sqs.store.queues():
        if other.account != dlq.account:
            continue
        _, redrive = q.consumer_view(sqs.store.pull_consumer(other))
        if redrive is not None and redrive[0] == dlq.name:
            sources.append(other.name)
    sources.sort()
    return _page(sqs, call, sources, "queueUrls", always=True)
