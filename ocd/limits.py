"""Every limit and error code ocd's surfaces share, in one table.

The binding, the REST API (its handlers and its OpenAPI schemas), the config file, the CLI,
the dashboard, the SQS endpoint and the JS producer protocol all read their numbers here;
``tests/unit/test_limits.py`` holds each surface to this table. (``runtime`` may not import
``ocd``: its copy of the delay range is held to ``DELAY_S`` by that test.)

=====================================  =============================  ====================
limit                                  value                          where it comes from
=====================================  =============================  ====================
a message's body (encoded)             ``MESSAGE_BYTES`` 128,000 B    Cloudflare Queues
messages per sendBatch / batch push    ``BATCH_MESSAGES`` 100         Cloudflare Queues
a batch's bodies together              ``BATCH_BYTES`` 256,000 B      Cloudflare Queues
send / retry / delivery delay          ``DELAY_S`` 0..86,400 s        Cloudflare Queues
message retention                      ``RETENTION_S`` 60..1,209,600  Cloudflare Queues
                                       s, default 345,600 (4 days)
a pull's visibility timeout            ``VISIBILITY_MS`` 1..43,200,000 Cloudflare Queues
                                       ms (12 h), default 30,000
messages per pull                      ``PULL_BATCH`` 1..100          Cloudflare Queues
SQS DelaySeconds                       ``SQS_DELAY_S`` 0..900 s       SQS
SQS VisibilityTimeout                  ``SQS_VISIBILITY_S`` 0..43,200  SQS
SQS MaximumMessageSize                 ``SQS_MESSAGE_BYTES`` 1 MiB    SQS (since 2025)
a KV key (UTF-8)                       ``KV_KEY_BYTES`` 512 B         Workers KV
a KV value                             ``KV_VALUE_BYTES`` 25 MiB      Workers KV
a KV key's metadata (JSON)             ``KV_METADATA_BYTES`` 1,024 B  Workers KV
a KV expiry, from now                  ``KV_MIN_TTL_S`` 60 s at least Workers KV
keys per KV list                       ``KV_LIST_KEYS`` 1..1,000      Workers KV
an R2 object key (UTF-8)               ``R2_KEY_BYTES`` 1,024 B       R2
an R2 object (one put)                 ``R2_OBJECT_BYTES`` < 5 GiB    R2
an R2 object's custom metadata         ``R2_METADATA_BYTES`` 2,048 B  R2
objects per R2 list                    ``R2_LIST_KEYS`` 1..1,000      R2
a multipart part but the last          ``R2_PART_BYTES`` >= 5 MiB     R2
parts of a multipart upload            ``R2_PARTS`` 1..10,000         R2
=====================================  =============================  ====================

Error codes are Cloudflare's where one is known (reference 1.5 and the REST API's 10000 /
11xxx); a comment says where a code is ocd's own.
"""

from __future__ import annotations

from typing import NamedTuple


class Range(NamedTuple):
    """An inclusive range of integers."""

    low: int
    high: int

    def __contains__(self, value: object) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.low <= value <= self.high
        )

    @property
    def text(self) -> str:
        return f"{self.low}..{self.high}"


# ---------------------------------------------------------------- Cloudflare Queues

MESSAGE_BYTES = 128_000
BATCH_MESSAGES = 100
BATCH_BYTES = 256_000
DELAY_S = Range(0, 86_400)
RETENTION_S = Range(60, 1_209_600)
RETENTION_DEFAULT_S = 345_600
VISIBILITY_MS = Range(1, 43_200_000)
VISIBILITY_S = Range(1, 43_200)  # the same, in seconds (ocd consume, ocd queues)
VISIBILITY_DEFAULT_MS = 30_000
PULL_BATCH = Range(1, 100)

# ---------------------------------------------------------------- SQS

SQS_DELAY_S = Range(0, 900)
SQS_VISIBILITY_S = Range(0, 43_200)
SQS_MESSAGE_BYTES = 1_048_576
WORKER_REQUEST_BYTES = 100 * 1024 * 1024  # a request body to a Worker (Free and Pro plans)

# ---------------------------------------------------------------- Workers KV

KV_KEY_BYTES = 512
KV_VALUE_BYTES = 25 * 1024 * 1024
KV_METADATA_BYTES = 1024
KV_MIN_TTL_S = 60
KV_LIST_KEYS = Range(1, 1000)

# ---------------------------------------------------------------- R2

R2_KEY_BYTES = 1024
R2_OBJECT_BYTES = 5 * 1024**3 - 5 * 1024**2
R2_METADATA_BYTES = 2048
R2_LIST_KEYS = Range(1, 1000)
R2_LIST_WITH_METADATA = 100  # R2 lists fewer when it includes metadata
R2_PART_BYTES = 5 * 1024 * 1024
R2_PARTS = Range(1, 10_000)
R2_DELETE_KEYS = 1000

# ---------------------------------------------------------------- error codes

AUTH_ERROR = 10000
INVALID_TOKEN = 1000  # /user/tokens/verify: "Invalid API Token"
USER_UNAUTHORIZED = 9109  # /user: "Unauthorized to access requested resource"
SERVICE_NOT_FOUND = 10090  # /workers/services/{name}: no such worker
QUEUE_NAME_NOT_FOUND = 10104  # a binding's queue that does not exist
QUEUE_ID_MALFORMED = 10107
MESSAGE_METADATA_INVALID = 10203
MESSAGE_SIZE_OUT_OF_BOUNDS = 10204
BATCH_SIZE_OUT_OF_BOUNDS = 10205
BATCH_COUNT_OUT_OF_BOUNDS = 10206
BODY_INVALID = 10207
BODY_MALFORMED = 10208
STORAGE_FULL = 10251  # QueueStorageLimitExceeded
QUEUE_DISABLED = 10252
SERVICE_UNAVAILABLE = 10503  # workerd's producer protocol: "Service temporarily unavailable"
INTERNAL = 15000  # also workerd's default when a refusal names no code
STORE_UNAVAILABLE = 15001  # ocd's own: the queue database cannot be reached now; retry
OVERLOADED = 15002  # ocd's own: at the connection limit (server.max_connections); retry
QUEUE_NOT_FOUND = 11000
CONSUMER_NOT_FOUND = 11002  # ocd's own
CONSUMER_EXISTS = 11004
QUEUE_IN_USE = 11006  # ocd's own: the config file names the queue
QUEUE_EXISTS = 11009  # ocd's own: the name is taken in this account
NO_PULL_CONSUMER = 11010  # ocd's own
FEATURE_NOT_SUPPORTED = 11011  # ocd's own: a Cloudflare API ocd does not provide
TASK_NOT_FOUND = 11012  # ocd's own: no bulk move task of that id
TASK_RUNNING = 11013  # ocd's own: the queue has a redrive running (one at a time)
ROUTE_NOT_FOUND = 7003
METHOD_NOT_ALLOWED = 7001
