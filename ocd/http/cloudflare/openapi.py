"""The OpenAPI 3.1 document of everything ocd serves under /client/v4.

The bodies' schemas live in ``ocd.http.cloudflare.schemas``; this module adds the routes, their
parameters, and which error codes each can answer with. ``tests/integration/test_openapi.py``
checks the document against the router both ways and the responses against their schemas;
``tests/integration/test_api_fuzz.py`` checks that no request the schemas reject is accepted.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import json
from typing import Any

from aiohttp import web

from ocd.http.cloudflare.envelope import (
    AUTH_ERROR,
    BODY_INVALID,
    BODY_MALFORMED,
    CONSUMER_EXISTS,
    CONSUMER_NOT_FOUND,
    FEATURE_NOT_SUPPORTED,
    INTERNAL,
    INVALID_TOKEN,
    MESSAGE_METADATA_INVALID,
    METHOD_NOT_ALLOWED,
    NO_PULL_CONSUMER,
    OVERLOADED,
    QUEUE_DISABLED,
    QUEUE_EXISTS,
    QUEUE_IN_USE,
    QUEUE_NOT_FOUND,
    ROUTE_NOT_FOUND,
    SERVICE_NOT_FOUND,
    STORAGE_FULL,
    STORE_UNAVAILABLE,
    TASK_NOT_FOUND,
    TASK_RUNNING,
    USER_UNAUTHORIZED,
)
from ocd.http.cloudflare.schemas import SCHEMAS, Schema, array, error_item, obj, ref, string
from ocd.producer import (
    BATCH_COUNT_OUT_OF_BOUNDS,
    BATCH_SIZE_OUT_OF_BOUNDS,
    MAX_BATCH_BYTES,
    MAX_BATCH_MESSAGES,
    MAX_MESSAGE_BYTES,
    MESSAGE_SIZE_OUT_OF_BOUNDS,
)

CODES: dict[int, str] = {
    AUTH_ERROR: "authentication error: a missing or wrong bearer token, or an account the "
    "token does not open (all three look the same); also a request a web page sent (a "
    "cross-site Sec-Fetch-Site or Origin; without accounts, a Host that is not this machine)",
    MESSAGE_METADATA_INVALID: "a message's content_type is not json or text; or its FIFO "
    "keys do not fit its queue: message_group_id missing on a FIFO queue or given on a "
    "standard one, message_deduplication_id given on a standard queue or missing on a FIFO "
    "queue without content_based_deduplication, an id that is not 1-128 printable ASCII "
    "characters without spaces, or a delay_seconds other than 0 on a FIFO queue; also a "
    "delay_seconds out of range, on a send or on an ack's retry",
    MESSAGE_SIZE_OUT_OF_BOUNDS: f"a message is larger than {MAX_MESSAGE_BYTES} bytes encoded",
    BATCH_SIZE_OUT_OF_BOUNDS: f"a batch is larger than {MAX_BATCH_BYTES} bytes encoded",
    BATCH_COUNT_OUT_OF_BOUNDS: f"a batch has more than {MAX_BATCH_MESSAGES} messages",
    BODY_INVALID: "the request is well-formed JSON but a field is missing, unknown, of the "
    "wrong type or out of range (errors[].source.pointer names it); also (413) a body over "
    "1 MiB, sent or once inflated from its Content-Encoding; "
    "and the FIFO type rules: a rename that adds or removes '.fifo', a dead-letter queue of "
    "the other type than its queue, FIFO settings on a standard queue",
    BODY_MALFORMED: "the request body is empty where one is required, not JSON, nested too "
    "deeply, or not in its Content-Encoding; also (408) a body not received within "
    "server.body_timeout, and (415) a Content-Encoding other than gzip or deflate, or a body "
    "without Content-Type: application/json",
    QUEUE_DISABLED: "the queue's delivery is paused (message: queue_delivery_paused)",
    QUEUE_NOT_FOUND: "no queue with that id or name in this account",
    CONSUMER_NOT_FOUND: "the queue has no consumer with that id",
    CONSUMER_EXISTS: "the queue already has a consumer; a queue has one at a time",
    QUEUE_IN_USE: "the queue (or its consumer) is named in ocd's config file, so it cannot be "
    "deleted or renamed over the API",
    QUEUE_EXISTS: "a queue with that name already exists in this account",
    NO_PULL_CONSUMER: "the queue has no HTTP pull consumer",
    ROUTE_NOT_FOUND: "no route for that path (any path under /client/v4)",
    METHOD_NOT_ALLOWED: "the path exists but not with that method (any path under /client/v4)",
    INTERNAL: "an unexpected server error; the daemon logs it with event api_failed",
    INVALID_TOKEN: "the bearer token opens no account (wrangler then takes it for an account "
    "token)",
    USER_UNAUTHORIZED: "ocd's tokens belong to accounts, not to users: there is no user to show",
    SERVICE_NOT_FOUND: "no worker of that name in this account's config",
    FEATURE_NOT_SUPPORTED: "a Cloudflare API that ocd does not provide",
    TASK_NOT_FOUND: "no bulk move task with that id in this account",
    TASK_RUNNING: "the queue has a redrive running; one redrive per queue at a time",
    STORAGE_FULL: "the disk (SQLite) or the database's storage (PostgreSQL) is full; the "
    "message says where. Nothing was written. Pulls and acks go on working, so that "
    "consumers can drain the queue; retry once space is freed",
    STORE_UNAVAILABLE: "the queue database cannot be reached now (e.g. PostgreSQL is "
    "down or the connection was lost); nothing was written, or the write is safe to retry",
    OVERLOADED: "ocd is at its connection limit (server.max_connections), every connection "
    "busy; retry shortly",
}

# ------------------------------------------------------------------------ responses


def success(result: Schema, *, paged: bool = False) -> Schema:
    envelope = obj(
        {
            "success": {"const": True},
            "errors": array(ref("ErrorItem"), maxItems=0),
            "messages": array(string(), description="Notes, e.g. v8 messages a pull skipped."),
            "result": result,
        },
        ("success", "errors", "messages", "result"),
    )
    if paged:
        envelope["properties"]["result_info"] = ref("ResultInfo")
        envelope["required"].append("result_info")
    return {"description": "Success.", "content": {"application/json": {"schema": envelope}}}


STATUS_TEXT = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    408: "Request body not received within server.body_timeout",
    409: "Conflict",
    413: "Request body over 1 MiB, as sent or once inflated",
    415: "Unsupported Content-Encoding, or a body not sent as application/json",
    500: "Internal error",
    501: "Not implemented",
    503: "Unavailable now; retry after Retry-After seconds",
    507: "Storage full; retry once space is freed",
}


RETRY_AFTER: Schema = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def failure(status: int, codes: list[int]) -> Schema:
    lines = "".join(f"\n- `{c}`: {CODES[c]}" for c in codes)
    envelope = obj(
        {
            "success": {"const": False},
            "errors": array(error_item(codes), minItems=1),
            "messages": array(string()),
            "result": {"type": "null"},
        },
        ("success", "errors", "messages", "result"),
    )
    response: Schema = {
        "description": f"{STATUS_TEXT[status]}. Error codes:{lines}",
        "content": {"application/json": {"schema": envelope}},
    }
    if status in (503, 507):
        response["headers"] = RETRY_AFTER
    return response


# The faults any operation of a kind can meet, not the request's own mistakes: shared
# entries in components/responses, which the operations reference.
RESPONSES: dict[str, tuple[int, list[int]]] = {
    "BodyTimeout": (408, [BODY_MALFORMED]),
    "UnsupportedEncoding": (415, [BODY_MALFORMED]),
    "StorageFull": (507, [STORAGE_FULL]),
    "Unavailable": (503, [STORE_UNAVAILABLE, OVERLOADED]),  # operations on the database
    "Overloaded": (503, [OVERLOADED]),  # those that answer from the config alone
}
# POSTs that only read: they never need new space
READ_ONLY_POSTS = {"messages-peek", "messages-browse", "messages-search"}


def shared(name: str) -> Schema:
    return {"$ref": f"#/components/responses/{name}"}


def result(name: str) -> Schema:
    return success(ref(name))


SEND_CODES = [MESSAGE_METADATA_INVALID, MESSAGE_SIZE_OUT_OF_BOUNDS]
BATCH_CODES = [*SEND_CODES, BATCH_SIZE_OUT_OF_BOUNDS, BATCH_COUNT_OUT_OF_BOUNDS]
SEND_NOTE = "Goes through the same producer as worker bindings: same limits, same codes."

# ------------------------------------------------------------------------ operations

Operation = tuple[str, str, Schema]  # method, path, operation object
T = "/accounts/{account_id}/move_tasks"


def operation(
    method: str,
    path: str,
    op_id: str,
    summary: str,
    ok: Schema,
    *,
    body: str | None = None,
    body_required: bool = True,
    errors: dict[int, list[int]] | None = None,
    **extra: Any,
) -> Operation:
    """One operation. Every one can fail with 403 (auth), 500 and 503 (connection limit;
    and database unreachable for one on the database, under /queues or /move_tasks);
    one under a queue with 404 (no such queue); one with a body with 400, 408, 413 and 415
    for the body's own problems; one that writes to the database with 507 (storage
    full)."""
    codes: dict[int, list[int]] = {403: [AUTH_ERROR]}
    if "{queue_id}" in path:
        codes[404] = [QUEUE_NOT_FOUND]
    if body is not None:
        codes[400] = [BODY_INVALID, BODY_MALFORMED]
        codes[413] = [BODY_INVALID]
    for status, more in (errors or {}).items():
        codes[status] = [*codes.get(status, []), *more]
    codes[500] = [INTERNAL]
    op: Schema = {"operationId": op_id, "tags": [op_id.split("-")[0].title()], "summary": summary}
    op.update(extra)
    if body is not None:
        op["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": ref(body)}},
        }
    faults: dict[int, str] = {}
    on_database = path.startswith(("/accounts/{account_id}/queues", T))
    if body is not None:
        faults |= {408: "BodyTimeout", 415: "UnsupportedEncoding"}
    if on_database and method != "get" and op_id not in READ_ONLY_POSTS:
        faults[507] = "StorageFull"
    faults[503] = "Unavailable" if on_database else "Overloaded"
    responses: Schema = {str(s): failure(s, codes[s]) for s in codes}
    responses |= {str(s): shared(name) for s, name in faults.items()}
    op["responses"] = {"200": ok} | dict(sorted(responses.items()))
    return method, path, op


def param(name: str, description: str, where: str = "path", **schema: Any) -> Schema:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": {"type": "string", **schema},
    }


PATH_PARAMS = {
    "account_id": param("account_id", '"local" when ocd has no [[accounts]] configured.'),
    "queue_id": param("queue_id", "The queue's 32-hex id, or its name."),
    "consumer_id": param("consumer_id", "The consumer's 32-hex id."),
    "name": param("name", "A worker's name."),
    "subscription_id": param("subscription_id", "An event subscription's id."),
    "task_id": param("task_id", "The move task's id."),
}
PAGE_QUERY = [
    param("page", "1-based page.", "query", type="integer", minimum=1, maximum=1_000_000),
    param("per_page", "Items per page (20).", "query", type="integer", minimum=1, maximum=1000),
]
SUBS = "/accounts/{account_id}/event_subscriptions/subscriptions"
NOT_SUPPORTED = {501: [FEATURE_NOT_SUPPORTED]}
# Operations that answer only an error, documented so that clients get a clear refusal.
ALWAYS_FAIL = {
    "user-get",
    *(f"event-subscriptions-{x}" for x in ("list", "create", "get", "edit", "delete")),
}

LIST_QUERY = [
    {
        "name": "name",
        "in": "query",
        "description": "Only queues with one of these names (repeatable).",
        "schema": array(string()),
        "style": "form",
        "explode": True,
    },
    param("page", "1-based page.", "query", type="integer", minimum=1, maximum=1_000_000),
    param("per_page", "Queues per page (100).", "query", type="integer", minimum=1, maximum=1000),
]

Q = "/accounts/{account_id}/queues"
ONE = Q + "/{queue_id}"
C = ONE + "/consumers"
M = ONE + "/messages"

OPERATIONS: list[Operation] = [
    operation("post", Q, "queues-create", "Create a queue", result("Queue"),
              body="QueueCreate", errors={409: [QUEUE_EXISTS]}),
    operation("get", Q, "queues-list", "List the account's queues",
              success(array(ref("Queue")), paged=True),
              errors={400: [BODY_INVALID]}, parameters=LIST_QUERY),
    operation("get", ONE, "queues-get", "Get a queue", result("Queue")),
    operation("put", ONE, "queues-update", "Replace a queue's name and settings",
              result("Queue"), body="QueueChange", errors={409: [QUEUE_IN_USE, QUEUE_EXISTS]}),
    operation("patch", ONE, "queues-edit", "Change some of a queue's name and settings",
              result("Queue"), body="QueueChange", errors={409: [QUEUE_IN_USE, QUEUE_EXISTS]}),
    operation("delete", ONE, "queues-delete", "Delete a queue and its messages",
              success({"type": "null"}), errors={409: [QUEUE_IN_USE]}),
    operation("get", ONE + "/metrics", "queues-metrics", "Backlog of a queue", result("Metrics")),
    operation("post", ONE + "/purge", "queues-purge", "Delete every message of a queue",
              result("Queue"), body="PurgeInput"),
    operation("get", ONE + "/purge", "queues-purge-status", "Status of the last purge",
              result("PurgeStatus")),
    operation("post", C, "consumers-create", "Add an HTTP pull consumer",
              result("PullConsumer"), body="ConsumerInput", errors={409: [CONSUMER_EXISTS]}),
    operation("get", C, "consumers-list", "The queue's consumer, if any",
              success(array(ref("Consumer"), maxItems=1))),
    operation("get", C + "/{consumer_id}", "consumers-get", "Get a consumer",
              result("Consumer"), errors={404: [CONSUMER_NOT_FOUND]}),
    operation("put", C + "/{consumer_id}", "consumers-update",
              "Replace the HTTP pull consumer, or create it if the queue has none",
              result("PullConsumer"), body="ConsumerInput", errors={404: [CONSUMER_NOT_FOUND]}),
    operation("delete", C + "/{consumer_id}", "consumers-delete", "Remove the HTTP pull consumer",
              success({"type": "null"}),
              errors={404: [CONSUMER_NOT_FOUND], 409: [QUEUE_IN_USE]}),
    operation("post", M, "messages-push", "Send one message", result("SendResult"),
              body="MessageInput", errors={400: SEND_CODES}, description=SEND_NOTE),
    operation("post", M + "/batch", "messages-push-batch", "Send up to 100 messages, all or none",
              result("SendResult"), body="BatchInput", errors={400: BATCH_CODES},
              description=SEND_NOTE),
    operation("post", M + "/pull", "messages-pull", "Lease ready messages", result("PullResult"),
              body="PullInput", body_required=False,
              errors={400: [NO_PULL_CONSUMER], 409: [QUEUE_DISABLED]}),
    operation("post", M + "/ack", "messages-ack", "Acknowledge or retry pulled messages",
              result("AckResult"), body="AckInput", body_required=False,
              errors={400: [NO_PULL_CONSUMER, MESSAGE_METADATA_INVALID]}),
    operation("post", M + "/peek", "messages-peek", "Look at ready messages without leasing them",
              result("PeekResult"), body="PeekInput", body_required=False),
    operation("post", M + "/purge", "messages-purge", "Delete peeked messages by ref",
              result("RefsPurged"), body="PurgeRefsInput"),
    operation("get", "/user/tokens/verify", "user-tokens-verify", "The caller's token status",
              result("TokenStatus"), errors={401: [INVALID_TOKEN]}),
    operation("get", "/user", "user-get", "Always 9109: ocd's tokens belong to accounts",
              success({"type": "null"}), errors={403: [USER_UNAUTHORIZED]}),
    operation("get", "/accounts", "accounts-list", "The accounts the caller's token opens",
              success(array(ref("Account")), paged=True), errors={400: [BODY_INVALID]},
              parameters=PAGE_QUERY),
    operation("get", "/memberships", "memberships-list", "The caller's account memberships",
              success(array(ref("Membership")), paged=True), errors={400: [BODY_INVALID]},
              parameters=PAGE_QUERY),
    operation("get", "/accounts/{account_id}/workers/services/{name}", "workers-services-get",
              "A worker of ocd's config as a service (wrangler asks before removing a "
              "worker consumer)", result("Service"), errors={404: [SERVICE_NOT_FOUND]}),
    operation("get", SUBS, "event-subscriptions-list", "Not supported by ocd",
              success({"type": "null"}), errors=NOT_SUPPORTED),
    operation("post", SUBS, "event-subscriptions-create", "Not supported by ocd",
              success({"type": "null"}), errors=NOT_SUPPORTED),
    operation("get", SUBS + "/{subscription_id}", "event-subscriptions-get",
              "Not supported by ocd", success({"type": "null"}), errors=NOT_SUPPORTED),
    operation("patch", SUBS + "/{subscription_id}", "event-subscriptions-edit",
              "Not supported by ocd", success({"type": "null"}), errors=NOT_SUPPORTED),
    operation("delete", SUBS + "/{subscription_id}", "event-subscriptions-delete",
              "Not supported by ocd", success({"type": "null"}), errors=NOT_SUPPORTED),
    # ocd's extensions: browsing, search, bulk moves (the dashboard uses them)
    operation("post", M + "/browse", "messages-browse",
              "A page of messages by keyset cursor, any state, without leasing them",
              result("BrowseResult"), body="BrowseInput", body_required=False),
    operation("post", M + "/search", "messages-search",
              "Search the newest messages' bodies (bounded) or find one by id",
              result("SearchResult"), body="SearchInput"),
    operation("post", M + "/move", "messages-move",
              "Redrive (e.g. dead-letter queue back to its source) or delete messages in bulk, "
              "as a bounded background task kept across restarts (the same task as SQS's "
              "StartMessageMoveTask and `ocd queues redrive`); one redrive per queue at a time",
              result("MoveTask"), body="MoveInput", errors={409: [TASK_RUNNING]}),
    operation("get", T, "tasks-list", "The account's bulk move tasks",
              success(array(ref("MoveTask")))),
    operation("get", T + "/{task_id}", "tasks-get", "A bulk move task's progress",
              result("MoveTask"), errors={404: [TASK_NOT_FOUND]}),
    operation("post", T + "/{task_id}/cancel", "tasks-cancel",
              "Stop a bulk move task after its current chunk", result("MoveTask"),
              errors={404: [TASK_NOT_FOUND]}),
]  # fmt: skip

OPENAPI_GET: Schema = {
    "operationId": "meta-openapi",
    "tags": ["Meta"],
    "summary": "This document",
    "security": [],
    "responses": {
        "200": {
            "description": "The OpenAPI document (not wrapped in the envelope).",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        "503": shared("Overloaded"),
    },
}


def paths() -> dict[str, Schema]:
    items: dict[str, Schema] = {}
    for method, path, op in OPERATIONS:
        if path not in items:
            names = [n for n in PATH_PARAMS if "{" + n + "}" in path]
            items[path] = {"parameters": [PATH_PARAMS[n] for n in names]}
        items[path][method] = op
    items["/openapi.json"] = {"get": OPENAPI_GET}
    return items


DESCRIPTION = """\
Cloudflare's Queues REST API as ocd serves it. Every response but this document's is
Cloudflare's envelope `{success, errors[{code, message, source?{pointer}}], messages,
result}`. Error codes:
""" + "".join(f"\n- `{code}`: {text}" for code, text in sorted(CODES.items()))

BEARER = {
    "type": "http",
    "scheme": "bearer",
    "description": "A token whose SHA-256 ocd's config lists for the account. With no "
    "[[accounts]] configured, the only account is `local` and no token is checked.",
}


def document() -> dict[str, Any]:
    try:
        version = importlib.metadata.version("ocd")
    except importlib.metadata.PackageNotFoundError:
        version = "0.0.0"
    return copy.deepcopy(
        {
            "openapi": "3.1.0",
            "info": {"title": "ocd Queues API", "version": version, "description": DESCRIPTION},
            "servers": [{"url": "/client/v4"}],
            "security": [{"bearerAuth": []}],
            "tags": [
                {"name": "Queues"},
                {"name": "Consumers"},
                {"name": "Messages", "description": "Push, and the HTTP pull consumer protocol."},
                {"name": "User", "description": "What wrangler asks about its token."},
                {"name": "Accounts"},
                {"name": "Memberships"},
                {"name": "Workers"},
                {"name": "Event"},
                {"name": "Tasks", "description": "ocd's own: bulk redrive and delete tasks."},
                {"name": "Meta"},
            ],
            "paths": paths(),
            "components": {
                "schemas": SCHEMAS,
                "responses": {n: failure(s, c) for n, (s, c) in RESPONSES.items()},
                "securitySchemes": {"bearerAuth": BEARER},
            },
        }
    )


@functools.cache
def _text() -> str:
    return json.dumps(document())


async def handler(request: web.Request) -> web.Response:
    return web.Response(text=_text(), content_type="application/json")
