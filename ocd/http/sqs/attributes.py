"""A queue's SQS attributes read from, and written to, ocd's own settings: the queue's
settings, its pull consumer (visibility timeout, redrive policy) and its counters.
``queues`` parses and checks the attribute values; this module applies them."""

from __future__ import annotations

import json
import secrets
from dataclasses import replace

from ocd.admin import check_dead_letter
from ocd.counts import queue_counts
from ocd.errors import ConsumerInConfig, DeadLetterTypeMismatch
from ocd.http.sqs import queues as q
from ocd.http.sqs.context import Call, SqsContext
from ocd.http.sqs.errors import SqsError
from ocd.store import PullConsumer, QueueRecord


async def _check_redrive_allowed(sqs: SqsContext, source: QueueRecord, dlq: QueueRecord) -> None:
    """The dead-letter queue's RedriveAllowPolicy: ``denyAll`` lets no queue name it,
    ``byQueue`` only the queues its ``sourceQueueArns`` name (of this account and region,
    where every queue a caller can name lives)."""
    policy = (await sqs.extras(dlq)).sqs_attrs.get("RedriveAllowPolicy")
    if not policy:
        return
    doc = json.loads(policy)  # checked when it was set
    allowed = doc.get("redrivePermission") == "allowAll" or (
        doc.get("redrivePermission") == "byQueue"
        and source.name in {str(a).rsplit(":", 1)[-1] for a in doc.get("sourceQueueArns", [])}
    )
    if not allowed:
        raise SqsError(
            "InvalidParameterValueException",
            f"Value for parameter RedrivePolicy is invalid. Reason: the RedriveAllowPolicy of "
            f"{dlq.name} does not allow {source.name} to use it as a dead-letter queue.",
        )


async def apply_consumer(sqs: SqsContext, queue: QueueRecord, wanted: q.Wanted) -> None:
    """VisibilityTimeout and RedrivePolicy live in the queue's pull consumer."""
    if wanted.visibility_s is None and wanted.redrive is None and not wanted.redrive_cleared:
        return
    current = sqs.store.pull_consumer(queue)
    consumer = current or PullConsumer(
        queue.key,
        secrets.token_hex(16),
        sqs.clock(),
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
        target = await sqs.store.lookup(dlq, queue.account)
        if target is None:
            raise q.no_dead_letter_target()
        await _check_redrive_allowed(sqs, queue, target)
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
        await sqs.admin.put_consumer(queue, consumer)
    except ConsumerInConfig as e:
        raise SqsError(
            "InvalidAttributeValue",
            f"Queue {queue.name} is consumed by worker {e.worker} in the ocd config file; "
            "its visibility timeout and redrive policy are set there.",
        ) from None


async def check_same(sqs: SqsContext, queue: QueueRecord, wanted: q.Wanted) -> None:
    """CreateQueue of an existing name: QueueNameExists unless the attributes asked for are
    the queue's."""
    vis, redrive = q.consumer_view(sqs.store.pull_consumer(queue))
    kept = (await sqs.extras(queue)).sqs_attrs if wanted.extras else {}
    s, w = queue.settings, wanted.settings
    differs = [
        n
        for n, same in (
            ("DelaySeconds", s.delivery_delay_s == w.delivery_delay_s),
            (
                "MessageRetentionPeriod",
                s.message_retention_period_s == w.message_retention_period_s,
            ),
            (
                "ContentBasedDeduplication",
                s.content_based_deduplication == w.content_based_deduplication,
            ),
            ("VisibilityTimeout", wanted.visibility_s in (None, vis)),
            ("RedrivePolicy", wanted.redrive in (None, redrive)),
            *(
                (k, v == kept.get(k, q.EXTRA_DEFAULTS.get(k) or ""))
                for k, v in wanted.extras.items()
            ),
        )
        if not same
    ]
    if differs:
        raise SqsError(
            "QueueNameExists",
            "A queue already exists with the same name and a different value for "
            f"attribute {differs[0]}",
        )


async def view(sqs: SqsContext, call: Call, queue: QueueRecord) -> dict[str, str]:
    """Every attribute GetQueueAttributes can show for the queue."""
    s = queue.settings
    extras = (await sqs.extras(queue)).sqs_attrs
    vis, redrive = q.consumer_view(sqs.store.pull_consumer(queue))
    now = sqs.clock()
    backlog = await sqs.store.backlog(queue)
    c = queue_counts(backlog.count, (await sqs.store.queue_stats(now)).get(queue.key))
    attrs = {
        "QueueArn": call.arn(queue.name),
        "ApproximateNumberOfMessages": str(c.ready),
        "ApproximateNumberOfMessagesNotVisible": str(c.in_flight),
        "ApproximateNumberOfMessagesDelayed": str(c.delayed),
        "CreatedTimestamp": str(queue.created_ms // 1000),
        "LastModifiedTimestamp": str(queue.modified_ms // 1000),
        "VisibilityTimeout": str(vis),
        "MessageRetentionPeriod": str(s.message_retention_period_s),
        "DelaySeconds": str(s.delivery_delay_s),
    }
    for key, default in q.EXTRA_DEFAULTS.items():
        value = extras.get(key, default)
        if value is not None and (key != "FifoThroughputLimit" or queue.fifo):
            attrs[key] = value
    if redrive is not None:
        attrs["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": call.arn(redrive[0]), "maxReceiveCount": redrive[1]},
            separators=(",", ":"),
        )
    if queue.fifo:
        attrs["FifoQueue"] = "true"
        attrs["ContentBasedDeduplication"] = str(s.content_based_deduplication).lower()
        attrs["DeduplicationScope"] = (
            "messageGroup" if s.deduplication_scope == "message_group" else "queue"
        )
    return attrs
