"""What SQS keeps for a queue that ocd's settings do not hold (``Store.queue_extras``):
the unmapped attributes (``Policy``, ``RedriveAllowPolicy``, ``MaximumMessageSize``,
``ReceiveMessageWaitTimeSeconds``, KMS and throughput settings), tags, and the permissions
AddPermission writes into ``Policy``. Kept and shown as SQS shows them; ocd enforces only
``MaximumMessageSize`` and ``ReceiveMessageWaitTimeSeconds`` (a policy grants nothing here:
accounts are ocd's own, see the README)."""

from __future__ import annotations

import json
import re
from typing import Any

from ocd.errors import QueueNotFound
from ocd.http.sqs import queues as q
from ocd.http.sqs.context import Call, SqsContext, string
from ocd.http.sqs.errors import SqsError, invalid, missing, no_queue
from ocd.store import QueueExtras, QueueRecord

MAX_TAGS = 50
MAX_STATEMENTS = 7  # AddPermission labels per queue (SQS's OverLimit)
MAX_PERMISSION_ACTIONS = 7  # actions in one AddPermission
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ACCOUNT = re.compile(r"\d{12}")
PERMISSION_ACTIONS = (
    "*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
    "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue",
    "ListQueueTags",
)  # fmt: skip
# SQS actions no permission can grant: SQS refuses them with their own reason
OWNER_ONLY_ACTIONS = (
    "AddPermission", "RemovePermission", "CreateQueue", "DeleteQueue", "ListQueues",
    "SetQueueAttributes", "TagQueue", "UntagQueue",
)  # fmt: skip


def merged(current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    out = dict(current)
    for k, v in changes.items():
        if v == "" or q.EXTRA_DEFAULTS.get(k) == v:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def max_message_bytes(ex: QueueExtras) -> int:
    return int(ex.sqs_attrs.get("MaximumMessageSize") or q.MAX_MESSAGE_BYTES)


def wait_s(ex: QueueExtras) -> int:
    return int(ex.sqs_attrs.get("ReceiveMessageWaitTimeSeconds", "0"))


async def save(sqs: SqsContext, queue: QueueRecord, new: QueueExtras) -> None:
    try:
        await sqs.put_extras(queue, new)
    except QueueNotFound:
        raise no_queue() from None


# ---------------------------------------------------------------- tags


def check_tags(queue: str, tags: Any, current: dict[str, str] | None = None) -> dict[str, str]:
    """``tags`` (on ``current``, the queue's) checked as SQS checks them."""
    if not isinstance(tags, dict):
        raise invalid("Tags must be a map of keys to values.")
    for k, v in tags.items():
        if not isinstance(k, str) or not 1 <= len(k) <= 128:
            raise invalid(f"Tag key {k!r} is invalid: 1 to 128 characters.")
        if k.lower().startswith("aws:"):
            raise invalid(f"Tag key {k!r} is invalid: the prefix aws: is reserved.")
        if not isinstance(v, str) or len(v) > 256:
            raise invalid(f"Tag value for {k!r} is invalid: up to 256 characters.")
    out = {**(current or {}), **tags}
    if len(out) > MAX_TAGS:
        raise invalid(f"Too many tags added for queue {queue}.")
    return out


async def tag_queue(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    if not call.params.get("Tags"):
        raise missing("Tags")
    ex = await sqs.extras(queue)
    tags = check_tags(queue.name, call.params["Tags"], ex.tags)
    await save(sqs, queue, QueueExtras(ex.sqs_attrs, tags))
    return {}


async def untag_queue(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    keys = call.params.get("TagKeys")
    if keys is None:
        raise missing("TagKeys")
    if not isinstance(keys, list):
        raise invalid("TagKeys must be a list of keys.")
    if not keys:
        raise invalid("Tag keys must be between 1 and 128 characters in length.")
    ex = await sqs.extras(queue)
    tags = {k: v for k, v in ex.tags.items() if k not in keys}
    await save(sqs, queue, QueueExtras(ex.sqs_attrs, tags))
    return {}


async def list_queue_tags(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    tags = (await sqs.extras(queue)).tags
    return {"Tags": dict(tags)} if tags else {}


# ---------------------------------------------------------------- permissions (Policy)


async def add_permission(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    queue = await sqs.queue(call)
    label = string(req, "Label")
    if not _LABEL.fullmatch(label):
        raise invalid(f"Value {label} for parameter Label is invalid.")
    accounts = req.get("AWSAccountIds")
    actions = req.get("Actions")
    if not actions:
        raise missing("Actions")
    if not isinstance(accounts, list) or not all(
        isinstance(a, str) and _ACCOUNT.fullmatch(a) for a in accounts
    ):
        shown = ", ".join(map(str, accounts)) if isinstance(accounts, list) else accounts or ""
        raise invalid(
            f"Value [{shown}] for parameter PrincipalId is invalid. Reason: Unable to verify."
        )
    if not isinstance(actions, list):
        raise invalid("Actions must be a list of action names.")
    if len(actions) > MAX_PERMISSION_ACTIONS:
        raise SqsError(
            "OverLimit",
            f"{len(actions)} Actions were found, maximum allowed is {MAX_PERMISSION_ACTIONS}.",
        )
    for a in actions:
        if a not in PERMISSION_ACTIONS:
            reason = (
                "Only the queue owner is allowed to invoke this action."
                if a in OWNER_ONLY_ACTIONS
                else "Please refer to the appropriate WSDL for a list of valid actions."
            )
            raise invalid(f"Value SQS:{a} for parameter ActionName is invalid. Reason: {reason}")
    ex = await sqs.extras(queue)
    arn = call.arn(queue.name)
    policy = json.loads(ex.sqs_attrs.get("Policy") or "null") or {
        "Version": "2008-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [],
    }
    statements = policy.setdefault("Statement", [])
    if any(s.get("Sid") == label for s in statements):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: Already exists.")
    if len(statements) >= MAX_STATEMENTS:
        raise SqsError("OverLimit", f"{MAX_STATEMENTS} permissions is the limit per queue.")
    statements.append(
        {
            "Sid": label,
            "Effect": "Allow",
            # one principal or action is written as a string, several as a list (as SQS)
            "Principal": {"AWS": _one_or_list([f"arn:aws:iam::{a}:root" for a in accounts])},
            "Action": _one_or_list([f"SQS:{a}" for a in actions]),
            "Resource": arn,
        }
    )
    attrs = {**ex.sqs_attrs, "Policy": json.dumps(policy, separators=(",", ":"))}
    await save(sqs, queue, QueueExtras(attrs, ex.tags))
    return {}


def _one_or_list(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


async def remove_permission(sqs: SqsContext, call: Call) -> dict[str, Any]:
    queue = await sqs.queue(call)
    label = string(call.params, "Label")
    ex = await sqs.extras(queue)
    policy = json.loads(ex.sqs_attrs.get("Policy") or "null") or {}
    statements = policy.get("Statement") or []
    kept = [s for s in statements if s.get("Sid") != label]
    if len(kept) == len(statements):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: can't find label.")
    attrs = dict(ex.sqs_attrs)
    if kept:
        policy["Statement"] = kept
        attrs["Policy"] = json.dumps(policy, separators=(",", ":"))
    else:
        attrs.pop("Policy", None)
    await save(sqs, queue, QueueExtras(attrs, ex.tags))
    return {}
