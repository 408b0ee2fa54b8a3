"""JSON schemas of the API's request and response bodies, for ``ocd.http.cloudflare.openapi``.

Request schemas say exactly what the handlers accept: ``null`` counts as "absent" for the
numbers, strings and arrays the handlers read that way (booleans must be true or false),
an integer may be written ``5.0`` (JSON Schema agrees), and every object the handlers check
for unknown fields is ``additionalProperties: false``. Response schemas require every field
ocd sends but stay open to more, as Cloudflare's do.
"""

from __future__ import annotations

from typing import Any

from ocd import limits
from ocd.http.cloudflare.context import QUEUE_NAME
from ocd.producer import (
    BATCH_SIZE_OUT_OF_BOUNDS,
    MAX_BATCH_BYTES,
    MAX_BATCH_MESSAGES,
    MAX_DELAY_S,
    MAX_MESSAGE_BYTES,
    MESSAGE_SIZE_OUT_OF_BOUNDS,
)
from ocd.pull import MAX_WAIT_MS

Schema = dict[str, Any]

MAX_VISIBILITY_MS = limits.VISIBILITY_MS.high  # 12 hours
# ocd.producer.check_fifo_id's rule: 1..128 printable ASCII characters, no space
FIFO_ID_PATTERN = "^[!-~]{1,128}$"
NAME_PATTERN = f"^{QUEUE_NAME.pattern}$"

# ------------------------------------------------------------------------ schema helpers


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(
    properties: dict[str, Schema],
    required: tuple[str, ...] = (),
    *,
    closed: bool = False,
    nullable: bool = False,
    description: str | None = None,
) -> Schema:
    s: Schema = {"type": ["object", "null"] if nullable else "object", "properties": properties}
    if required:
        s["required"] = list(required)
    if closed:
        s["additionalProperties"] = False
    if description:
        s["description"] = description
    return s


def integer(
    lo: int | None = None,
    hi: int | None = None,
    description: str | None = None,
    *,
    default: int | None = None,
    nullable: bool = False,
) -> Schema:
    s: Schema = {"type": ["integer", "null"] if nullable else "integer"}
    if lo is not None:
        s["minimum"] = lo
    if hi is not None:
        s["maximum"] = hi
    if default is not None:
        s["default"] = default
    if description:
        s["description"] = description
    return s


def optional_int(lo: int, hi: int, description: str, default: int | None = None) -> Schema:
    """A request field the handler reads as an integer, with null meaning "not given"."""
    return integer(lo, hi, description, default=default, nullable=True)


def string(description: str | None = None, **extra: Any) -> Schema:
    s: Schema = {"type": "string", **extra}
    if description:
        s["description"] = description
    return s


def array(items: Schema, description: str | None = None, **extra: Any) -> Schema:
    s: Schema = {"type": "array", "items": items, **extra}
    if description:
        s["description"] = description
    return s


def string_map(description: str) -> Schema:
    return {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": description,
    }


# ------------------------------------------------------------------------ request bodies

QUEUE_SETTINGS_INPUT = obj(
    {
        "delivery_delay": optional_int(*limits.DELAY_S, "Seconds every new message waits.", 0),
        "message_retention_period": optional_int(
            *limits.RETENTION_S,
            "Seconds a message is kept before it expires.",
            limits.RETENTION_DEFAULT_S,
        ),
        "delivery_paused": {
            "type": "boolean",
            "description": "Paused queues keep accepting messages but deliver none.",
        },
        "content_based_deduplication": {
            "type": "boolean",
            "default": False,
            "description": "FIFO queues only: a message sent without message_deduplication_id "
            "is deduplicated by the SHA-256 of its stored body. true on a standard queue is "
            "refused (10207).",
        },
        "deduplication_scope": {
            "enum": ["queue", "message_group", None],
            "default": "queue",
            "description": "FIFO queues only: whether a deduplication id is unique in the "
            'queue or in its message group. "message_group" on a standard queue is refused '
            "(10207).",
        },
    },
    closed=True,
    nullable=True,
    description="PUT: absent settings go back to their defaults. PATCH and create: absent "
    "settings keep their current (or default) value.",
)

JURISDICTION = {"description": "Accepted for compatibility with Cloudflare and ignored."}


def queue_input(name_required: bool) -> Schema:
    name = string(
        "1-63 letters, digits, '-' and '_', starting with a letter or digit; then '.fifo' "
        "for a FIFO queue. A rename cannot add or remove '.fifo' (10207)."
    )
    name["pattern"] = NAME_PATTERN
    if not name_required:
        name["type"] = ["string", "null"]
        name["description"] += " Absent or null: keep the current name."
    return obj(
        {"queue_name": name, "settings": ref("QueueSettingsInput"), "jurisdiction": JURISDICTION},
        ("queue_name",) if name_required else (),
        closed=True,
    )


CONSUMER_INPUT = obj(
    {
        "type": {
            "enum": ["http_pull", None],
            "default": "http_pull",
            "description": "Only HTTP pull consumers are managed over the API; worker "
            "consumers live in ocd's config file.",
        },
        "dead_letter_queue": {
            "type": ["string", "null"],
            "pattern": f"^$|{NAME_PATTERN}",
            "description": "Queue that exhausted messages move to (created if missing); "
            "empty or null for none. Cannot be the queue itself; a FIFO queue's must be a "
            "FIFO queue and a standard queue's a standard one (10207).",
        },
        "settings": obj(
            {
                "batch_size": optional_int(1, 100, "Default batch size of a pull.", 10),
                "max_retries": optional_int(0, 100, "Deliveries after the first.", 3),
                "visibility_timeout_ms": optional_int(
                    1, MAX_VISIBILITY_MS, "Default lease length of a pull.", 30_000
                ),
                "retry_delay": optional_int(0, MAX_DELAY_S, "Seconds before a retry.", 0),
            },
            closed=True,
            nullable=True,
        ),
        "script_name": JURISDICTION,
        "environment_name": JURISDICTION,
    },
    closed=True,
)

DELAY = optional_int(0, MAX_DELAY_S, "Seconds before the message can be delivered.")


def fifo_id(description: str) -> Schema:
    """A message group or deduplication id in a request: null or absent means not given."""
    return {
        "type": ["string", "null"],
        "pattern": FIFO_ID_PATTERN,
        "description": description,
    }


FIFO_MESSAGE_FIELDS: dict[str, Schema] = {
    "message_group_id": fifo_id(
        "FIFO queues: required, the ordered group the message joins; refused on a standard "
        "queue (10203). 1-128 printable ASCII characters without spaces."
    ),
    "message_deduplication_id": fifo_id(
        "FIFO queues: a send with an id seen in the last 5 minutes is accepted and stores "
        "nothing. Required unless the queue has content_based_deduplication; refused on a "
        "standard queue (10203)."
    ),
}

MESSAGE_INPUT: Schema = {
    **obj(
        {
            "body": {"description": "Any JSON value; a string for content_type text."},
            "content_type": {"enum": ["json", "text", None], "default": "json"},
            "delay_seconds": {
                **DELAY,
                "description": f"{DELAY['description']} Must be 0 on a FIFO queue (10203).",
            },
            **FIFO_MESSAGE_FIELDS,
        },
        ("body",),
        closed=True,
        description=f"At most {MAX_MESSAGE_BYTES} bytes once encoded (code "
        f"{MESSAGE_SIZE_OUT_OF_BOUNDS}).",
    ),
    "if": {"properties": {"content_type": {"const": "text"}}, "required": ["content_type"]},
    "then": {"properties": {"body": {"type": "string"}}},
}

BATCH_INPUT = obj(
    {
        "messages": array(
            ref("MessageInput"),
            f"At most {MAX_BATCH_BYTES} bytes in all once encoded (code "
            f"{BATCH_SIZE_OUT_OF_BOUNDS}). Stored all or none.",
            minItems=1,
            maxItems=MAX_BATCH_MESSAGES,
        ),
        "delay_seconds": {
            **DELAY,
            "description": "Delay for messages that set none. Must be 0 on a FIFO queue (10203).",
        },
    },
    ("messages",),
    closed=True,
)

VISIBILITY = optional_int(
    1, MAX_VISIBILITY_MS, "Lease length; default: the consumer's visibility_timeout_ms."
)

PULL_INPUT: Schema = {
    **obj(
        {
            "batch_size": optional_int(1, 100, "Most messages to lease.", 5),
            "visibility_timeout_ms": VISIBILITY,
            "visibility_timeout": {
                **VISIBILITY,
                "deprecated": True,
                "description": "Older name of visibility_timeout_ms, always checked; used "
                "when visibility_timeout_ms is absent or null.",
            },
            "wait_ms": optional_int(
                0, MAX_WAIT_MS, "ocd's own: wait this long for a message if none is ready.", 0
            ),
        },
        closed=True,
    ),
}

LEASE = obj({"lease_id": string("From a pull.")}, ("lease_id",), closed=True)

ACK_INPUT = obj(
    {
        "acks": {**array(ref("LeaseInput")), "type": ["array", "null"]},
        "retries": {
            **array(
                obj(
                    {"lease_id": string("From a pull."), "delay_seconds": DELAY},
                    ("lease_id",),
                    closed=True,
                )
            ),
            "type": ["array", "null"],
            "description": "delay_seconds defaults to the consumer's retry_delay.",
        },
        "undecodable": {
            **array(
                obj(
                    {
                        "lease_id": string("From a pull."),
                        "reason": {
                            "type": ["string", "null"],
                            "description": "Why the body could not be decoded (logged); "
                            'null or absent: "not given".',
                        },
                    },
                    ("lease_id",),
                    closed=True,
                )
            ),
            "type": ["array", "null"],
            "description": "ocd's own: messages whose body the consumer could not decode, "
            "dead-lettered at once (moved to the consumer's dead-letter queue, or deleted "
            "without one) whatever attempts they have left.",
        },
    },
    closed=True,
)

PEEK_INPUT = obj({"batch_size": optional_int(1, 100, "Most messages to show.", 1)}, closed=True)

PURGE_REFS_INPUT = obj(
    {"refs": array(obj({"ref": string("From a peek.")}, ("ref",), closed=True))},
    ("refs",),
    closed=True,
)

PURGE_INPUT = obj(
    {
        "delete_messages_permanently": {
            "const": True,
            "description": "Must be true: purging deletes every message of the queue.",
        }
    },
    ("delete_messages_permanently",),
    closed=True,
)

# ------------------------------------------------------------------------ results

TIMESTAMP = string(format="date-time")

METRICS = obj(
    {
        "backlog_count": integer(0),
        "backlog_bytes": integer(0),
        "oldest_message_timestamp_ms": integer(0, description="0 when the queue is empty."),
        "ready_count": integer(
            0, description="ocd's own (GET .../metrics only): of the backlog, ready now."
        ),
        "delayed_count": integer(
            0, description="ocd's own: not ready yet (a delay or a retry delay), not leased."
        ),
        "inflight_count": integer(0, description="ocd's own: under a lease that has not lapsed."),
    },
    ("backlog_count", "backlog_bytes", "oldest_message_timestamp_ms"),
)

WITH_METRICS = obj({"metrics": ref("Metrics")}, ("metrics",))

QUEUE = obj(
    {
        "queue_id": string(pattern="^[0-9a-f]{32}$"),
        "queue_name": string(),
        "created_on": TIMESTAMP,
        "modified_on": TIMESTAMP,
        "producers": array(
            obj(
                {"type": {"const": "worker"}, "script": string("Worker from ocd's config.")},
                ("type", "script"),
            )
        ),
        "producers_total_count": integer(0),
        "consumers": array(ref("Consumer"), maxItems=1),
        "consumers_total_count": integer(0, 1),
        "settings": obj(
            {
                "delivery_delay": integer(*limits.DELAY_S),
                "delivery_paused": {"type": "boolean"},
                "message_retention_period": integer(*limits.RETENTION_S),
                "content_based_deduplication": {
                    "type": "boolean",
                    "description": "FIFO queues only (absent on standard queues).",
                },
                "deduplication_scope": {
                    "enum": ["queue", "message_group"],
                    "description": "FIFO queues only (absent on standard queues).",
                },
            },
            ("delivery_delay", "delivery_paused", "message_retention_period"),
        ),
    },
    (
        "queue_id",
        "queue_name",
        "created_on",
        "modified_on",
        "producers",
        "producers_total_count",
        "consumers",
        "consumers_total_count",
        "settings",
    ),
)

CONSUMER_FIELDS = ("consumer_id", "created_on", "queue_name", "type", "dead_letter_queue")


def consumer(kind: str, extra: dict[str, Schema], settings: dict[str, Schema]) -> Schema:
    return obj(
        {
            "consumer_id": string(pattern="^[0-9a-f]{32}$"),
            "created_on": TIMESTAMP,
            "queue_name": string(),
            "type": {"const": kind},
            **extra,
            "dead_letter_queue": string('"" when there is none.'),
            "settings": obj(settings, tuple(settings)),
        },
        (*CONSUMER_FIELDS, *extra, "settings"),
    )


WORKER_CONSUMER = consumer(
    "worker",
    {
        "script": string("Worker from ocd's config file (what wrangler reads)."),
        "script_name": string("The same worker."),
        "service": string("The same worker, as a service with one environment."),
        "environment": {"const": "production"},
    },
    {
        "batch_size": integer(1),
        "max_retries": integer(0),
        "max_wait_time_ms": integer(0),
        "max_concurrency": integer(1, nullable=True),
        "retry_delay": integer(0),
    },
)

PULL_CONSUMER = consumer(
    "http_pull",
    {},
    {
        "batch_size": integer(1, 100),
        "max_retries": integer(0, 100),
        "visibility_timeout_ms": integer(1, MAX_VISIBILITY_MS),
        "retry_delay": integer(0, MAX_DELAY_S),
    },
)


def delivered(handle: str, description: str) -> Schema:
    """A pulled or peeked message; ``handle`` is its lease_id or ref."""
    return obj(
        {
            "id": string(pattern="^[0-9a-f]{32}$"),
            "body": string("text: the string itself; json and bytes: base64 of the encoding."),
            "attempts": integer(0),
            "timestamp_ms": integer(0, description="When it was sent."),
            "metadata": obj(
                {"CF-Content-Type": {"enum": ["json", "text", "bytes", "v8"]}},
                ("CF-Content-Type",),
            ),
            handle: string(description),
            "message_group_id": string("FIFO queues only (absent on standard queues)."),
            "sequence_number": integer(
                0,
                description="FIFO queues only: strictly increasing per queue in send order, "
                "never reused, the same on every delivery of the message.",
            ),
            "message_deduplication_id": string(
                "FIFO queues only: the id given on send, or the SHA-256 (hex) of the body "
                "with content_based_deduplication."
            ),
        },
        ("id", "body", "attempts", "timestamp_ms", "metadata", handle),
    )


PULL_RESULT = obj(
    {
        "message_backlog_count": integer(0),
        "messages": array(ref("PulledMessage")),
        "metadata": ref("WithMetrics"),
    },
    ("message_backlog_count", "messages", "metadata"),
)

ACK_RESULT = obj(
    {
        "ackCount": integer(0),
        "retryCount": integer(0, description="Retried, dead-lettered or dropped as exhausted."),
        "warnings": string_map("lease_id -> why it was ignored."),
    },
    ("ackCount", "retryCount", "warnings"),
)

PURGE_STATUS = obj(
    {
        "started_at": {**TIMESTAMP, "type": ["string", "null"]},
        "completed": {"enum": ["true", "false"], "description": "A string, as Cloudflare's."},
    },
    ("started_at", "completed"),
    description="A purge completes inside its request, so the last one is always complete.",
)


def error_item(codes: list[int] | None = None) -> Schema:
    code = integer(1000) if codes is None else {"type": "integer", "enum": codes}
    return obj(
        {
            "code": code,
            "message": string(),
            "source": obj({"pointer": string("JSON pointer (RFC 6901) into the request body.")}),
        },
        ("code", "message"),
    )


PEEK_RESULT = obj({"messages": array(ref("PeekedMessage"))}, ("messages",))

REFS_PURGED = obj(
    {
        "errors": array(string(), maxItems=0, description="Always empty."),
        "warnings": string_map("ref -> why it was ignored."),
    },
    ("errors", "warnings"),
)

RESULT_INFO = obj(
    {
        "page": integer(1),
        "per_page": integer(1),
        "count": integer(0),
        "total_count": integer(0),
        "total_pages": integer(1),
    },
    ("page", "per_page", "count", "total_count", "total_pages"),
)

TOKEN_STATUS = obj(
    {"id": string(pattern="^[0-9a-f]{32}$"), "status": {"const": "active"}}, ("id", "status")
)
ACCOUNT_REF = obj({"id": string(), "name": string()}, ("id", "name"))
ACCOUNT = obj(
    {
        "id": string('"local", or an [[accounts]] id.'),
        "name": string(),
        "type": string(),
        "settings": obj({"enforce_twofactor": {"type": "boolean"}}),
        "created_on": TIMESTAMP,
    },
    ("id", "name", "type"),
)
MEMBERSHIP = obj(
    {
        "id": string(),
        "account": ACCOUNT_REF,
        "roles": array(string()),
        "status": string(),
        "permissions": obj(
            {"queues": obj({"read": {"type": "boolean"}, "write": {"type": "boolean"}})}
        ),
    },
    ("id", "account", "roles", "status"),
)
ENVIRONMENT = obj(
    {"environment": {"const": "production"}, "script": obj({"id": string()}, ("id",))},
    ("environment", "script"),
)
SERVICE = obj(
    {"id": string(), "default_environment": ENVIRONMENT, "environments": array(ENVIRONMENT)},
    ("id", "default_environment", "environments"),
)

SCHEMAS: dict[str, Schema] = {
    "QueueSettingsInput": QUEUE_SETTINGS_INPUT,
    "QueueCreate": queue_input(name_required=True),
    "QueueChange": queue_input(name_required=False),
    "ConsumerInput": CONSUMER_INPUT,
    "MessageInput": MESSAGE_INPUT,
    "BatchInput": BATCH_INPUT,
    "PullInput": PULL_INPUT,
    "LeaseInput": LEASE,
    "AckInput": ACK_INPUT,
    "PeekInput": PEEK_INPUT,
    "PurgeRefsInput": PURGE_REFS_INPUT,
    "PurgeInput": PURGE_INPUT,
    "Queue": QUEUE,
    "Consumer": {"oneOf": [ref("WorkerConsumer"), ref("PullConsumer")]},
    "WorkerConsumer": WORKER_CONSUMER,
    "PullConsumer": PULL_CONSUMER,
    "Metrics": METRICS,
    "WithMetrics": WITH_METRICS,
    "SendResult": obj({"metadata": ref("WithMetrics")}, ("metadata",)),
    "PullResult": PULL_RESULT,
    "AckResult": ACK_RESULT,
    "PeekResult": PEEK_RESULT,
    "RefsPurged": REFS_PURGED,
    "PurgeStatus": PURGE_STATUS,
    "PulledMessage": delivered("lease_id", "Acks or retries this delivery."),
    "PeekedMessage": delivered("ref", "Deletes this message through messages/purge."),
    "ErrorItem": error_item(),
    "TokenStatus": TOKEN_STATUS,
    "Account": ACCOUNT,
    "Membership": MEMBERSHIP,
    "Service": SERVICE,
    "ResultInfo": RESULT_INFO,
}

# ------------------------------------------------------------------------ ocd's extensions:
# browsing, search and bulk moves (what the dashboard uses)

CURSOR = {
    "type": ["string", "null"],
    "pattern": "^([0-9]{1,18}-[0-9]{1,18})?$",
    "description": "The cursor a page returned: the next page starts after it.",
}
TIME_MS = optional_int(0, 1 << 53, "Epoch milliseconds, inclusive.")
BROWSE_FILTER = {
    "state": {"enum": ["any", "ready", "delayed", "inflight", None], "default": "any"},
    "min_attempts": optional_int(0, 1000, "Only messages with at least this many attempts.", 0),
    "sent_after_ms": TIME_MS,
    "sent_before_ms": TIME_MS,
}
BODY_BYTES = optional_int(0, 65_536, "How much of each body to return (800).", 800)

BROWSE_INPUT = obj(
    {
        "limit": optional_int(1, 100, "Messages per page.", 25),
        "order": {"enum": ["oldest", "newest", None], "default": "oldest"},
        "cursor": CURSOR,
        "body_bytes": BODY_BYTES,
        **BROWSE_FILTER,
    },
    closed=True,
    description="A page in send order by keyset cursor. Never leases, acks or reorders.",
)

BROWSED_MESSAGE = obj(
    {
        "id": string(),
        "seq": integer(1, description="The message's position in the store; names it in moves."),
        "cursor": string(),
        "timestamp_ms": integer(0, description="When it was sent."),
        "visible_ms": integer(0, description="When it is (or was) deliverable."),
        "attempts": integer(0),
        "state": {"enum": ["ready", "delayed", "inflight"]},
        "size": integer(0, description="The whole body's size in bytes."),
        "metadata": obj(
            {"CF-Content-Type": {"enum": ["json", "text", "bytes", "v8"]}}, ("CF-Content-Type",)
        ),
        "body": string("text: the string itself; others: base64 of the stored bytes."),
        "body_truncated": {"type": "boolean"},
        "message_group_id": string("FIFO queues: the message group."),
        "sequence_number": integer(0, description="FIFO queues: order within its group."),
    },
    ("id", "seq", "cursor", "timestamp_ms", "attempts", "state", "size", "body"),
)

BROWSE_RESULT = obj(
    {"messages": array(ref("BrowsedMessage")), "cursor": {"type": ["string", "null"]}},
    ("messages", "cursor"),
)

SEARCH_INPUT = obj(
    {
        "query": {"type": ["string", "null"], "description": "A substring of the body."},
        "message_id": {"type": ["string", "null"], "description": "The message's id."},
        "limit": optional_int(1, 100, "Most matches.", 25),
        "body_bytes": BODY_BYTES,
    },
    closed=True,
    description="Looks at the newest [ui] search_scan_limit messages only (100,000). "
    "Needs a non-empty query or message_id (both: messages matching both); an empty "
    'string counts as absent, so {} or {"query": ""} is refused (10207).',
)
# what the description says, for validators and generators: one of the two, non-empty
SEARCH_INPUT["anyOf"] = [
    {"required": [key], "properties": {key: {"type": "string", "minLength": 1}}}
    for key in ("query", "message_id")
]

SEARCH_RESULT = obj(
    {
        "messages": array(ref("BrowsedMessage")),
        "scanned": integer(0, description="How many messages the search looked at."),
        "scan_limit": integer(1),
    },
    ("messages", "scanned", "scan_limit"),
)

MOVE_INPUT = obj(
    {
        "action": {"enum": ["redrive", "delete"]},
        "destination": {
            "type": ["string", "null"],
            "minLength": 1,
            "description": "redrive: the queue to move to (its name); default the one source "
            "queue whose consumer dead-letters here. delete: must be absent or null.",
        },
        "seqs": {
            **array(integer(1, (1 << 62) - 1), minItems=1, maxItems=10_000),
            "type": ["array", "null"],
            "description": "These messages only, each one this queue holds now (a seq it "
            "does not hold refuses the whole move, 10207); absent: every message matching "
            "filter.",
        },
        "filter": obj(BROWSE_FILTER, closed=True, nullable=True),
        "rate": {
            **integer(1, 10_000),
            "type": ["integer", "null"],
            "description": "At most this many messages a second (SQS's "
            "MaxNumberOfMessagesPerSecond); absent: as fast as the chunks go.",
        },
    },
    ("action",),
    closed=True,
)
MOVE_INPUT["if"] = {"properties": {"action": {"const": "delete"}}}
MOVE_INPUT["then"] = {"properties": {"destination": {"type": "null"}}}

MOVE_TASK = obj(
    {
        "id": string(),
        "action": {"enum": ["redrive", "delete"]},
        "queue": string(),
        "destination": {"type": ["string", "null"]},
        "total": integer(0, description="The upper bound, fixed when the task started."),
        "done": integer(0),
        "state": {
            "enum": ["running", "cancelling", "completed", "cancelled", "failed"],
            "description": "A task survives a restart of the daemon: it goes on from where it "
            "was, or is failed with the reason in error.",
        },
        "error": {"type": ["string", "null"]},
        "rate": {"type": ["integer", "null"], "description": "Messages a second at most."},
        "started_ms": integer(0),
        "finished_ms": {"type": ["integer", "null"]},
    },
    ("id", "action", "queue", "total", "done", "state", "started_ms"),
)

SCHEMAS.update(
    {
        "BrowseInput": BROWSE_INPUT,
        "BrowsedMessage": BROWSED_MESSAGE,
        "BrowseResult": BROWSE_RESULT,
        "SearchInput": SEARCH_INPUT,
        "SearchResult": SEARCH_RESULT,
        "MoveInput": MOVE_INPUT,
        "MoveTask": MOVE_TASK,
    }
)
