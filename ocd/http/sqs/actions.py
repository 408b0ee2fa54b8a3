"""The action table: every SQS action by name, and the function that answers it.

An action takes the :class:`~ocd.http.sqs.context.SqsContext` and the
:class:`~ocd.http.sqs.context.Call` and returns the reply's members (JSON member names);
errors are :class:`~ocd.http.sqs.errors.SqsError`. The actions live by concept in
``queue_actions``, ``message_actions`` (and the move tasks in ``moves``); none writes SQL
or reaches into the Cloudflare surface. A new action is one line here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ocd.http.sqs import message_actions as m
from ocd.http.sqs import moves
from ocd.http.sqs import queue_actions as qa
from ocd.http.sqs import queue_extras as qx
from ocd.http.sqs.context import Call, SqsContext

Action = Callable[[SqsContext, Call], Awaitable[dict[str, Any]]]


ACTIONS: dict[str, Action] = {
    "CreateQueue": qa.create_queue,
    "GetQueueUrl": qa.get_queue_url,
    "ListQueues": qa.list_queues,
    "DeleteQueue": qa.delete_queue,
    "GetQueueAttributes": qa.get_queue_attributes,
    "SetQueueAttributes": qa.set_queue_attributes,
    "PurgeQueue": qa.purge_queue,
    "ListDeadLetterSourceQueues": qa.list_dead_letter_source_queues,
    "TagQueue": qx.tag_queue,
    "UntagQueue": qx.untag_queue,
    "ListQueueTags": qx.list_queue_tags,
    "AddPermission": qx.add_permission,
    "RemovePermission": qx.remove_permission,
    "SendMessage": m.send_message,
    "SendMessageBatch": m.send_message_batch,
    "ReceiveMessage": m.receive_message,
    "DeleteMessage": m.delete_message,
    "DeleteMessageBatch": m.delete_message_batch,
    "ChangeMessageVisibility": m.change_message_visibility,
    "ChangeMessageVisibilityBatch": m.change_message_visibility_batch,
    "StartMessageMoveTask": moves.start_message_move_task,
    "ListMessageMoveTasks": moves.list_message_move_tasks,
    "CancelMessageMoveTask": moves.cancel_message_move_task,
}
ACTION_NAMES = tuple(ACTIONS)
