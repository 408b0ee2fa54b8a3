"""Queue URLs, ARNs and the queue attributes SQS shows, mapped onto ocd's queue settings.

An SQS queue is an ocd queue of the same name in the caller's account (``local`` without
``[[accounts]]``, shown to SQS clients as ``000000000000``) in its region: the account itself
in ``[sqs] region``, ``<account>@<region>`` in any other (``sigv4.regional_account``).
What SQS calls a queue's visibility timeout and redrive policy is its HTTP pull consumer
(``visibility_timeout_ms``, ``max_retries`` = maxReceiveCount - 1, ``dead_letter_queue``),
the same setting the Cloudflare REST API shows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from ocd import limits
from ocd.http.sqs.errors import SqsError, no_queue
from ocd.store import PullConsumer, QueueSettings

LOCAL_ACCOUNT_ID = "000000000000"
# Without a redrive policy SQS redelivers for ever; the store counts attempts anyway.
UNLIMITED_RECEIVES = 1_000_000_000
DEFAULT_VISIBILITY_S = 30
MAX_VISIBILITY_S = limits.SQS_VISIBILITY_S.high
MAX_DELAY_S = limits.SQS_DELAY_S.high
MAX_MESSAGE_BYTES = limits.SQS_MESSAGE_BYTES  # SQS's limit (and default) since 2025: 1 MiB

_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_FIFO_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}\.fifo")

ALL_ATTRIBUTES = (
    "Policy", "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod",
    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp",
    "LastModifiedTimestamp", "QueueArn", "ApproximateNumberOfMessagesDelayed", "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "FifoQueue", "ContentBasedDeduplication",
    "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "DeduplicationScope",
    "FifoThroughputLimit", "RedriveAllowPolicy", "SqsManagedSseEnabled",
)  # fmt: skip
_SETTABLE = (
    "VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "RedrivePolicy",
    "ContentBasedDeduplication", "DeduplicationScope", "FifoQueue", "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds", "FifoThroughputLimit", "SqsManagedSseEnabled",
    "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "Policy", "RedriveAllowPolicy",
)  # fmt: skip
# Attributes kept as the queue's extras (``Store.queue_extras``), not in ocd's settings,
# with the value shown while none is set (None: not shown).
EXTRA_DEFAULTS: dict[str, str | None] = {
    "MaximumMessageSize": str(MAX_MESSAGE_BYTES),
    "ReceiveMessageWaitTimeSeconds": "0",
    "SqsManagedSseEnabled": "false",
    "FifoThroughputLimit": "perQueue",
    "Policy": None,
    "RedriveAllowPolicy": None,
    "KmsMasterKeyId": None,
    "KmsDataKeyReusePeriodSeconds": None,
}
_FIFO_ONLY = ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")


def is_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is an SQS queue name. One that is not names no queue (every ocd
    queue name is one), so it need not be looked up: a store may not even take it (a NUL
    or a lone surrogate is no text to PostgreSQL)."""
    return isinstance(name, str) and bool(_NAME.fullmatch(name) or _FIFO_NAME.fullmatch(name))


def check_name(name: object) -> str:
    if not is_name(name):
        raise SqsError(
            "InvalidParameterValueException",
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        )
    return name


def queue_name_of(url: object, account_id: str) -> str:
    """The queue name of a QueueUrl (or a bare name) of the caller's account (its 12-digit
    ``account_id``); QueueDoesNotExist for another account's: one account never learns
    whether another has a queue of that name."""
    if not isinstance(url, str) or not url:
        raise no_queue()
    parts = url.rstrip("/").split("/")
    if (len(parts) > 1 and parts[-2] != account_id) or not is_name(parts[-1]):
        raise no_queue()
    return parts[-1]


def arn(region: str, account_id: str, name: str) -> str:
    return f"arn:aws:sqs:{region}:{account_id}:{name}"


def name_of_arn(value: object) -> str:
    if (
        not isinstance(value, str)
        or value.count(":") != 5
        or not value.startswith("arn:aws:sqs:")
        or not is_name(value.rsplit(":", 1)[1])
    ):
        raise SqsError("InvalidParameterValueException", f"Invalid ARN: {value!r}")
    return value.rsplit(":", 1)[1]


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a CreateQueue or SetQueueAttributes asks for, checked."""

    settings: QueueSettings
    visibility_s: int | None = None
    redrive: tuple[str, int] | None = None  # (dead-letter queue name, maxReceiveCount)
    redrive_cleared: bool = False
    extras: dict[str, str] = field(default_factory=dict)  # EXTRA_DEFAULTS keys; "" clears


def _int(name: str, value: object, lo: int, hi: int) -> int:
    try:
        n = int(str(value))
    except ValueError:
        n = lo - 1
    if not lo <= n <= hi:
        raise SqsError(
            "InvalidAttributeValue",
            f"Invalid value for the parameter {name}. Reason: must be between {lo} and {hi}.",
        )
    return n


def _bool(name: str, value: object) -> bool:
    text = str(value).lower()
    if text not in ("true", "false"):
        raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}.")
    return text == "true"


def no_dead_letter_target() -> SqsError:
    return SqsError(
        "InvalidParameterValueException",
        "Value for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.",
    )


def parse_attributes(
    name: str, attrs: Any, base: QueueSettings, creating: bool, arn_prefix: str
) -> Wanted:
    """The attributes asked for, checked; a ``deadLetterTargetArn`` must start with
    ``arn_prefix`` (the caller's region and account): another's does not exist."""
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, dict):
        raise SqsError("InvalidParameterValueException", "Attributes must be a map")
    fifo = name.endswith(".fifo")
    settings = base
    wanted = Wanted(settings)
    for key, value in attrs.items():
        if key not in _SETTABLE:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {key}.")
        if key in _FIFO_ONLY and not fifo:
            raise SqsError(
                "InvalidAttributeName",
                f"Unknown Attribute {key}."
                if key == "ContentBasedDeduplication"
                else f"You can specify the {key} only when FifoQueue is set to true.",
            )
        if key == "FifoQueue":
            want = _bool(key, value)
            if want != fifo:
                reason = (
                    "Modifying queue type is not supported."
                    if not creating
                    else "The name of a FIFO queue can only include alphanumeric characters, "
                    "hyphens, or underscores, must end with .fifo suffix."
                )
                raise SqsError(
                    "InvalidAttributeValue",
                    f"Invalid value for the parameter FifoQueue. Reason: {reason}",
                )
        elif key == "VisibilityTimeout":
            wanted = replace(wanted, visibility_s=_int(key, value, 0, MAX_VISIBILITY_S))
        elif key == "MessageRetentionPeriod":
            settings = replace(
                settings, message_retention_period_s=_int(key, value, *limits.RETENTION_S)
            )
        elif key == "DelaySeconds":
            settings = replace(settings, delivery_delay_s=_int(key, value, 0, MAX_DELAY_S))
        elif key == "ContentBasedDeduplication":
            settings = replace(settings, content_based_deduplication=_bool(key, value))
        elif key == "DeduplicationScope":
            if value not in ("queue", "messageGroup"):
                raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {key}.")
            scope = "queue" if value == "queue" else "message_group"
            settings = replace(settings, deduplication_scope=scope)
        elif key == "RedrivePolicy":
            if value in ("", "{}"):
                wanted = replace(wanted, redrive=None, redrive_cleared=True)
                continue
            wanted = replace(wanted, redrive=_redrive(value, arn_prefix))
        elif key in EXTRA_DEFAULTS:
            wanted.extras[key] = check_extra(key, value)
    return replace(wanted, settings=settings)


def _bad(key: str, reason: str) -> SqsError:
    return SqsError(
        "InvalidAttributeValue", f"Invalid value for the parameter {key}. Reason: {reason}"
    )


def check_extra(key: str, value: object) -> str:
    """An unmapped attribute's value, checked; "" clears a document attribute."""
    text = "" if value is None else str(value)
    if key == "MaximumMessageSize":
        if not text.isdigit() or not 1024 <= int(text) <= MAX_MESSAGE_BYTES:
            raise _bad(key, f"must be between 1024 and {MAX_MESSAGE_BYTES}.")
        return str(int(text))
    if key == "ReceiveMessageWaitTimeSeconds":
        if not text.isdigit() or not 0 <= int(text) <= 20:
            raise _bad(key, "must be between 0 and 20.")
        return str(int(text))
    if key == "KmsDataKeyReusePeriodSeconds":
        if not text.isdigit() or not 60 <= int(text) <= 86_400:
            raise _bad(key, "must be between 60 and 86400.")
        return str(int(text))
    if key == "SqsManagedSseEnabled":
        if text.lower() not in ("true", "false"):
            raise _bad(key, "must be true or false.")
        return text.lower()
    if key == "FifoThroughputLimit":
        if text not in ("perQueue", "perMessageGroupId"):
            raise _bad(key, "must be perQueue or perMessageGroupId.")
        return text
    if key in ("Policy", "RedriveAllowPolicy") and text:
        try:
            doc = json.loads(text)
        except ValueError:
            raise _bad(key, "not a valid JSON document.") from None
        if not isinstance(doc, dict):
            raise _bad(key, "not a JSON object.")
        if key == "RedriveAllowPolicy":
            perm = doc.get("redrivePermission")
            if perm not in ("allowAll", "denyAll", "byQueue"):
                raise _bad(key, "redrivePermission must be allowAll, denyAll or byQueue.")
            arns = doc.get("sourceQueueArns")
            if perm == "byQueue" and (not isinstance(arns, list) or not 1 <= len(arns) <= 10):
                raise _bad(key, "byQueue needs 1 to 10 sourceQueueArns.")
        return json.dumps(doc, separators=(",", ":"))
    return text  # KmsMasterKeyId: kept as given


def _redrive(value: object, arn_prefix: str) -> tuple[str, int]:
    try:
        doc: Any = json.loads(value) if isinstance(value, str) else value
        target_arn = doc["deadLetterTargetArn"]
        target = name_of_arn(target_arn)
        count = int(doc["maxReceiveCount"])
    except (ValueError, TypeError, KeyError, SqsError):
        raise SqsError(
            "InvalidAttributeValue",
            "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a "
            "valid JSON map with deadLetterTargetArn and maxReceiveCount.",
        ) from None
    if not 1 <= count <= 1000:
        raise SqsError(
            "InvalidAttributeValue",
            "Invalid value for the parameter RedrivePolicy. Reason: maxReceiveCount must be "
            "between 1 and 1000.",
        )
    if not target_arn.startswith(arn_prefix):  # another region's or account's queue
        raise no_dead_letter_target()
    return target, count


def consumer_view(consumer: PullConsumer | None) -> tuple[int, tuple[str, int] | None]:
    """(visibility timeout in seconds, redrive (queue, maxReceiveCount)) of a pull consumer."""
    if consumer is None:
        return DEFAULT_VISIBILITY_S, None
    vis = consumer.visibility_timeout_ms // 1000
    if consumer.dead_letter_queue and consumer.max_retries < UNLIMITED_RECEIVES:
        return vis, (consumer.dead_letter_queue, consumer.max_retries + 1)
    return vis, None
