"""What every SQS action works with: the domain operations it calls (``SqsContext``), the
request it answers (``Call``), and the request checks the actions share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ocd.admin import Admin
from ocd.clock import Clock
from ocd.http.sqs import queues as q
from ocd.http.sqs.errors import SqsError, invalid, missing, no_queue
from ocd.http.sqs.sigv4 import Caller, Verifier
from ocd.producer import Producer
from ocd.pull import PullService
from ocd.store import (
    CatalogueReads,
    Messages,
    PullConsumer,
    QueueAdmin,
    QueueExtras,
    QueueRecord,
)

MAX_BATCH = 10
EXTRAS_FRESH_MS = 1000  # another node's change to a queue's extras is seen within this
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")


class SqsStore(CatalogueReads, QueueAdmin, Messages, Protocol):
    """What the SQS actions read of the store themselves (writes go through the producer,
    the pull service and admin): the catalogue, a queue's extras, backlogs and counts."""


@dataclass
class SqsContext:
    store: SqsStore
    producer: Producer
    pull: PullService
    admin: Admin
    clock: Clock
    region: str
    public_url: str | None = None
    verifier: Verifier | None = None  # None: no [[accounts]], any credentials are local
    purges: dict[str, int] = field(default_factory=dict)  # queue id -> this node's last purge
    # queue id -> (read at, extras): sends and receives read them, so not once per request
    _extras: dict[str, tuple[int, QueueExtras]] = field(default_factory=dict)

    async def extras(self, queue: QueueRecord) -> QueueExtras:
        """The queue's tags and unmapped SQS attributes: this node's own changes at once,
        another node's within ``EXTRAS_FRESH_MS``."""
        now = self.clock()
        cached = self._extras.get(queue.queue_id)
        if cached is not None and now - cached[0] < EXTRAS_FRESH_MS:
            return cached[1]
        found = await self.store.queue_extras(queue)
        self._extras[queue.queue_id] = (now, found)
        return found

    async def put_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        self._extras.pop(queue.queue_id, None)
        await self.admin.set_queue_extras(queue, extras)
        self._extras[queue.queue_id] = (self.clock(), extras)

    def url(self, call: Call, queue: QueueRecord) -> str:
        return self.url_of(call, queue.name)

    def url_of(self, call: Call, name: str) -> str:
        """The QueueUrl of the caller's queue ``name``: it routes back here."""
        return f"{self.public_url or call.base}/{call.caller.account_id}/{name}"

    async def queue(self, call: Call) -> QueueRecord:
        """The caller's queue its ``QueueUrl`` names, in the caller's region;
        QueueDoesNotExist if there is none (or it names another account)."""
        name = q.queue_name_of(call.params.get("QueueUrl"), call.caller.account_id)
        found = await self.store.lookup(name, call.account)
        if found is None:
            raise no_queue()
        return found

    def consumer(self, queue: QueueRecord) -> PullConsumer:
        """The queue's pull consumer, or the SQS defaults while it has none."""
        found = self.store.pull_consumer(queue)
        if found is not None:
            return found
        return PullConsumer(
            queue.key, "", 0, None, 10, q.UNLIMITED_RECEIVES, q.DEFAULT_VISIBILITY_S * 1000
        )


@dataclass(frozen=True, slots=True)
class Call:
    """One request: its members (JSON member names), the scheme and host it came in on,
    and who sent it (``sigv4.Caller``: ocd account, 12-digit account id, region)."""

    params: dict[str, Any]
    base: str
    caller: Caller

    @property
    def account(self) -> str:
        """The store account of the caller's queues: its ocd account in ``[sqs] region``,
        ``<account>@<region>`` in any other (``sigv4.regional_account``)."""
        return self.caller.store_account

    def arn(self, name: str) -> str:
        return q.arn(self.caller.region, self.caller.account_id, name)

    @property
    def arn_prefix(self) -> str:
        """What the ARNs of the caller's queues (its region, its account) start with."""
        return self.arn("")


def string(req: dict[str, Any], key: str, required: bool = True) -> Any:
    value = req.get(key)
    if value is None and required:
        raise missing(key)
    if value is not None and not isinstance(value, str):
        raise invalid(f"Value for parameter {key} is invalid. Reason: must be a string.")
    return value


def integer(
    req: dict[str, Any],
    key: str,
    lo: int,
    hi: int,
    default: int | None,
    reason: str | None = None,
) -> int | None:
    """``req[key]`` as an int in ``lo..hi``; SQS words the reason differently for some
    parameters (``reason``)."""
    value = req.get(key)
    if value is None:
        return default
    try:
        n = int(value) if not isinstance(value, bool) else lo - 1
    except (TypeError, ValueError):
        n = lo - 1
    if not lo <= n <= hi:
        why = reason or f"Must be between {lo} and {hi}, if provided."
        raise invalid(f"Value {value} for parameter {key} is invalid. Reason: {why}")
    return n


def entries(req: dict[str, Any], op: str) -> list[dict[str, Any]]:
    """A batch request's entries, checked as SQS checks the whole request (``op``: the
    batch action, which SQS names when the batch is empty)."""
    found = req.get("Entries")
    if not found:
        raise SqsError(
            "EmptyBatchRequest", f"There should be at least one {op}RequestEntry in the request."
        )
    if not isinstance(found, list) or not all(isinstance(e, dict) for e in found):
        raise invalid("Entries must be a list of entries")
    if len(found) > MAX_BATCH:
        raise SqsError(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(found)}.",
        )
    seen: set[str] = set()
    for e in found:
        i = e.get("Id")
        if not isinstance(i, str) or not _BATCH_ID.fullmatch(i):
            raise SqsError(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                "underscores. It can be at most 80 letters long.",
            )
        if i in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {i} repeated.")
        seen.add(i)
    return found


def failed(entry_id: str, e: SqsError) -> dict[str, Any]:
    """A batch entry's failure, as a batch reply lists it."""
    return {"Id": entry_id, "SenderFault": True, "Code": e.query_code, "Message": e.message}
