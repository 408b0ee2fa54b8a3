"""SQS's dead-letter redrive: StartMessageMoveTask, ListMessageMoveTasks and
CancelMessageMoveTask, on ``Admin``'s move tasks (the same tasks the REST API's
``messages/move`` and ``ocd queues redrive`` start; the store keeps them across restarts).

- The source is a dead-letter queue: some queue's redrive policy (or consumer) names it.
  Without ``DestinationArn`` its messages go back to that queue; ocd does not remember
  each message's own origin, so a dead-letter queue of several sources needs one named.
- One active task per source queue (``UnsupportedOperation`` for a second), at most
  ``MaxNumberOfMessagesPerSecond`` (1..500) messages a second.
- A task handle is the base64 of ``{"taskId", "sourceArn"}``, as SQS's are; statuses are
  SQS's: RUNNING, CANCELLING, COMPLETED, CANCELLED, FAILED.

Each is an action of the table in :mod:`ocd.http.sqs.actions`: ``(SqsContext, Call)``.
ARNs name the caller's own queues only: another account's (or region's) is a missing
resource, as SQS answers.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ocd.errors import MoveTaskRunning, QueueNotFound
from ocd.http.sqs import queues as q
from ocd.http.sqs.context import Call, SqsContext
from ocd.http.sqs.errors import SqsError, invalid, missing
from ocd.moves import MoveTask
from ocd.store import QueueRecord

MAX_RATE = 500
MAX_LISTED = 10


def _no_resource(what: str) -> SqsError:
    return SqsError(
        "ResourceNotFoundException",
        f"The resource that you specified for the {what} parameter doesn't exist.",
    )


async def _by_arn(sqs: SqsContext, call: Call, arn: object, what: str) -> QueueRecord:
    if not isinstance(arn, str) or not arn:
        raise missing(what)
    parts = arn.split(":")
    if len(parts) != 6 or parts[:3] != ["arn", "aws", "sqs"]:
        raise invalid(f"Value {arn} for parameter {what} is invalid. Reason: not an SQS queue ARN.")
    mine = parts[3] == call.caller.region and parts[4] == call.caller.account_id
    mine = mine and q.is_name(parts[5])
    found = await sqs.store.lookup(parts[5], call.account) if mine else None
    if found is None:
        raise _no_resource(what)
    return found


def _handle(call: Call, task: MoveTask) -> str:
    source = call.arn(task.queue)
    raw = json.dumps({"taskId": task.id, "sourceArn": source}, separators=(",", ":"))
    return base64.b64encode(raw.encode()).decode()


def _task_of(sqs: SqsContext, call: Call, handle: object) -> MoveTask:
    if not isinstance(handle, str) or not handle:
        raise missing("TaskHandle")
    try:
        decoded = json.loads(base64.b64decode(handle.encode(), validate=True))
        task_id = decoded["taskId"]
    except (ValueError, binascii.Error, KeyError, TypeError):
        raise SqsError("ResourceNotFoundException", "Task does not exist.") from None
    task = sqs.admin.task(call.account, str(task_id))
    if task is None or task.action != "redrive":
        raise SqsError("ResourceNotFoundException", "Task does not exist.")
    return task


async def start_message_move_task(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    source = await _by_arn(sqs, call, req.get("SourceArn"), "SourceArn")
    rate = req.get("MaxNumberOfMessagesPerSecond")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE
    ):
        raise invalid(
            f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must "
            f"be between 1 and {MAX_RATE}, if provided."
        )
    sources = sqs.admin.dead_letter_sources(source)
    if not sources:
        raise invalid("Source queue must be configured as a Dead Letter Queue.")
    if req.get("DestinationArn") is not None:
        dest = await _by_arn(sqs, call, req.get("DestinationArn"), "DestinationArn")
        if dest.key == source.key:
            raise invalid("The source and destination queues must be different.")
        if dest.fifo != source.fifo:
            raise invalid("The destination queue must be of the same type as the source.")
    else:
        if len(sources) != 1:
            raise invalid(
                f"Queue {source.name} is the dead-letter queue of {len(sources)} queues; ocd "
                "does not keep each message's original queue: give a DestinationArn."
            )
        found = await sqs.store.lookup(sources[0], source.account)
        if found is None:
            raise _no_resource("DestinationArn")
        dest = found
    try:
        task = await sqs.admin.start_move(source, dest, rate=rate, dead_lettered_only=True)
    except MoveTaskRunning:
        raise SqsError(
            "UnsupportedOperation",
            "There is already a task running. Only one active task is allowed for a source "
            "queue arn at a given time.",
        ) from None
    except QueueNotFound:
        raise _no_resource("SourceArn") from None
    return {"TaskHandle": _handle(call, task)}


async def list_message_move_tasks(sqs: SqsContext, call: Call) -> dict[str, Any]:
    req = call.params
    source = await _by_arn(sqs, call, req.get("SourceArn"), "SourceArn")
    limit = req.get("MaxResults", 1)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED:
        raise invalid(
            f"Value {limit} for parameter MaxResults is invalid. Reason: You must enter a "
            f"number that's between 1 and {MAX_LISTED}."
        )
    tasks = [
        t
        for t in sqs.admin.tasks(source.account)
        if t.action == "redrive" and t.queue_id == source.queue_id
    ]
    return {"Results": [_entry(call, t) for t in tasks[:limit]]}


def _entry(call: Call, t: MoveTask) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Status": t.state.upper(),
        "SourceArn": call.arn(t.queue),
        "ApproximateNumberOfMessagesMoved": t.done,
        "ApproximateNumberOfMessagesToMove": t.total,
        "StartedTimestamp": t.started_ms,
    }
    if t.state == "running":
        out["TaskHandle"] = _handle(call, t)
    if t.destination is not None:
        out["DestinationArn"] = call.arn(t.destination)
    if t.rate is not None:
        out["MaxNumberOfMessagesPerSecond"] = t.rate
    if t.error:
        out["FailureReason"] = t.error
    return out


async def cancel_message_move_task(sqs: SqsContext, call: Call) -> dict[str, Any]:
    task = _task_of(sqs, call, call.params.get("TaskHandle"))
    if task.state != "running":
        raise SqsError("UnsupportedOperation", "Only active tasks can be cancelled.")
    task = await sqs.admin.cancel_move(task)
    return {"ApproximateNumberOfMessagesMoved": task.done}
