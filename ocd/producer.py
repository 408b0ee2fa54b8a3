"""send / sendBatch semantics shared by worker bindings and (later) the REST API.

Everything is validated and encoded before anything is stored, so a rejected batch leaves
no trace; the call returns only after the store has committed the messages.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ocd import codec, limits
from ocd.clock import Clock, wall_ms
from ocd.decide import send_delay
from ocd.errors import QueueNotFound, QueueSendArgumentError, QueueSendError
from ocd.metrics import Metrics
from ocd.store import Backlog, CatalogueReads, FifoSent, Messages, NewMessage, QueueRecord

# from the one table (ocd.limits), under the names the surfaces import
MAX_MESSAGE_BYTES = limits.MESSAGE_BYTES
MAX_BATCH_MESSAGES = limits.BATCH_MESSAGES
MAX_BATCH_BYTES = limits.BATCH_BYTES
MAX_DELAY_S = limits.DELAY_S.high
MESSAGE_METADATA_INVALID = limits.MESSAGE_METADATA_INVALID
MESSAGE_SIZE_OUT_OF_BOUNDS = limits.MESSAGE_SIZE_OUT_OF_BOUNDS
BATCH_SIZE_OUT_OF_BOUNDS = limits.BATCH_SIZE_OUT_OF_BOUNDS
BATCH_COUNT_OUT_OF_BOUNDS = limits.BATCH_COUNT_OUT_OF_BOUNDS


def check_delay(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_S:
        raise QueueSendError(
            f"message delay {value!r} is invalid: must be an integer between 0 and "
            f"{MAX_DELAY_S} seconds",
            MESSAGE_METADATA_INVALID,
        )
    return value


# SQS's alphabet for message group and deduplication ids: printable ASCII, no space. The
# pattern documents it (the OpenAPI schema's); check_fifo_id tests the same with str methods.
_FIFO_ID = re.compile(r"[!-~]{1,128}")


def check_fifo_id(value: Any, what: str) -> str:
    """A message group or deduplication id: 1..128 printable ASCII characters, no space
    (SQS's alphabet, ``[!-~]``; str methods, a third of a regular expression's cost)."""
    if not (
        isinstance(value, str)
        and 0 < len(value) <= 128
        and value.isascii()
        and value.isprintable()
        and " " not in value
    ):
        raise QueueSendArgumentError(
            f"{what} {value!r} is invalid: must be 1 to 128 characters of letters, digits "
            "and punctuation (printable ASCII without spaces)",
            MESSAGE_METADATA_INVALID,
        )
    return value


def _fifo_keys(
    queue: QueueRecord,
    group: Any,
    dedup: Any,
    delay: int | None,
    batch_delay: int | None,
    data: bytes,
) -> tuple[str | None, str | None]:
    """Check a message's FIFO keys against its queue; (group, deduplication id)."""
    if not queue.fifo:
        if group is not None or dedup is not None:
            what = "messageGroupId" if group is not None else "messageDeduplicationId"
            raise QueueSendArgumentError(
                f"{what} is only valid on FIFO queues (names ending in .fifo); "
                f"{queue.name} is a standard queue",
                MESSAGE_METADATA_INVALID,
            )
        return None, None
    if group is None:
        raise QueueSendArgumentError(
            f"messageGroupId is required on the FIFO queue {queue.name}",
            MESSAGE_METADATA_INVALID,
        )
    if delay or batch_delay:
        raise QueueSendArgumentError(
            f"delaySeconds must be 0 on the FIFO queue {queue.name}: per-message and "
            "per-batch delays are not supported on FIFO queues (the queue's delivery_delay "
            "applies)",
            MESSAGE_METADATA_INVALID,
        )
    g = check_fifo_id(group, "messageGroupId")
    if dedup is not None:
        return g, check_fifo_id(dedup, "messageDeduplicationId")
    if not queue.settings.content_based_deduplication:
        raise QueueSendArgumentError(
            f"messageDeduplicationId is required on the FIFO queue {queue.name}, which does "
            "not have content_based_deduplication turned on",
            MESSAGE_METADATA_INVALID,
        )
    return g, hashlib.sha256(data).hexdigest()


# Content types as given that are already canonical.
_CANONICAL = frozenset(codec.CONTENT_TYPES)


# Message ids need to be unique, not secret (leases and refs are signed separately), and a
# getrandom() system call per message costs more than the rest of a send's encoding.
_ids = random.Random(os.urandom(32))


def new_message_id() -> str:
    return f"{_ids.getrandbits(128):032x}"


def new_message_ids(n: int) -> list[str]:
    """``n`` message ids from one draw: formatting one large number and slicing it costs a
    fraction of ``n`` draws."""
    if n == 1:
        return [new_message_id()]
    digits = f"{_ids.getrandbits(128 * n):0{32 * n}x}"
    return [digits[i : i + 32] for i in range(0, 32 * n, 32)]


def metrics_dict(b: Backlog) -> dict[str, Any]:
    """Backlog as the binding reports it (camelCase, aware UTC datetime or None)."""
    oldest = dt.datetime.fromtimestamp(b.oldest_ms / 1000, dt.UTC) if b.oldest_ms else None
    return {"backlogCount": b.count, "backlogBytes": b.bytes, "oldestMessageTimestamp": oldest}


class ProducerStore(CatalogueReads, Messages, Protocol):
    """What sends use of the store: ``enqueue``, and (through ``Producer.store``: bindings,
    the workerd producer endpoint) the catalogue and backlogs."""


class Producer:
    def __init__(
        self, store: ProducerStore, clock: Clock = wall_ms, metrics: Metrics | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self._sent: dict[tuple[str, str], Any] = {}  # (account, queue) -> labelled counter

    async def send(
        self,
        queue: QueueRecord,
        items: Sequence[tuple[Any, Any, Any, Any, Any]],
        batch_delay: Any = None,
        encoded: bool = False,
    ) -> Backlog:
        """Store ``(body, content_type, delay_s, group_id, deduplication_id)`` items
        (``None``: not given), all or none; ``encoded``: as ``send_with_ids``."""
        backlog, _, _ = await self.send_with_ids(queue, items, batch_delay, encoded=encoded)
        return backlog

    async def send_detailed(
        self,
        queue: QueueRecord,
        items: Sequence[tuple[Any, Any, Any, Any, Any]],
        batch_delay: Any = None,
    ) -> tuple[Backlog, list[FifoSent] | None]:
        """``send``, also answering for a FIFO queue each message's stored id and sequence
        number, and whether it was a duplicate."""
        backlog, _, sent = await self.send_with_ids(queue, items, batch_delay)
        return backlog, sent

    async def send_with_ids(
        self,
        queue: QueueRecord,
        items: Sequence[tuple[Any, Any, Any, Any, Any]],
        batch_delay: Any = None,
        attrs: Sequence[bytes | None] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        encoded: bool = False,
    ) -> tuple[Backlog, list[str], list[FifoSent] | None]:
        """``send_detailed``, also answering the id given to each message (for a FIFO
        duplicate, the id it was sent with; ``FifoSent`` has the stored one). ``attrs``, one
        per item, are stored with the messages untouched (``NewMessage.attrs``). The size
        limits are Cloudflare's unless a surface has its own (SQS: up to 1 MiB). With
        ``encoded``, every body is ``bytes`` already encoded for its content type (a JS
        Worker's, as workerd sent it), stored as it is."""
        if len(items) > MAX_BATCH_MESSAGES:
            raise QueueSendError(
                f"batch message count of {len(items)} exceeds limit of {MAX_BATCH_MESSAGES}",
                BATCH_COUNT_OUT_OF_BOUNDS,
            )
        batch_delay = check_delay(batch_delay)
        queue_delay = queue.settings.delivery_delay_s
        now = self.clock()
        messages: list[NewMessage] = []
        total = 0
        fifo = queue.fifo
        # what a message without options of its own gets, worked out once a batch
        default_visible = now + send_delay(None, batch_delay, queue_delay) * 1000
        ids = new_message_ids(len(items))
        for i, (body, ctype, delay, group, dedup) in enumerate(items):
            if ctype is None:
                ctype = "json"
            elif type(ctype) is not str or ctype not in _CANONICAL:
                ctype = codec.normalize_content_type(ctype)
            data = body if encoded else codec.encode(body, ctype)
            if len(data) > max_message_bytes:
                raise QueueSendError(
                    f"message length of {len(data)} bytes exceeds limit of {max_message_bytes}",
                    MESSAGE_SIZE_OUT_OF_BOUNDS,
                )
            total += len(data)
            if delay is not None:
                delay = check_delay(delay)
            if fifo or group is not None or dedup is not None:
                g, d = _fifo_keys(queue, group, dedup, delay, batch_delay, data)
                visible = now + queue_delay * 1000
                a = None if attrs is None else attrs[i]
                messages.append(NewMessage(ids[i], ctype, data, now, visible, g, d, a))
                continue
            if delay is None:
                visible = default_visible
            else:
                visible = now + send_delay(delay, batch_delay, queue_delay) * 1000
            if attrs is None or attrs[i] is None:
                messages.append(NewMessage(ids[i], ctype, data, now, visible))
            else:
                messages.append(NewMessage(ids[i], ctype, data, now, visible, None, None, attrs[i]))
        if total > max_batch_bytes:
            raise QueueSendError(
                f"batch size of {total} bytes exceeds limit of {max_batch_bytes}",
                BATCH_SIZE_OUT_OF_BOUNDS,
            )
        started = time.perf_counter()
        sent: list[FifoSent] | None = None
        if fifo:
            backlog, sent = await self.store.enqueue_fifo(queue, messages)
        else:
            backlog = await self.store.enqueue(queue, messages)
        ids = [m.id for m in messages]
        if self.metrics is None:
            return backlog, ids, sent
        self.metrics.send_commit.observe(time.perf_counter() - started)
        labels = (queue.account, queue.name)
        counter = self._sent.get(labels)
        if counter is None:
            counter = self._sent[labels] = self.metrics.sent.labels(*labels)
        counter.inc(len(messages) if sent is None else sum(not s.duplicate for s in sent))
        return backlog, ids, sent

    def binding(self, name: str, account: str) -> Binding:
        return Binding(self, name, account)


class Binding:
    """The backend behind one ``env.QUEUE``: finds the queue at each call, so settings
    changed at runtime apply to the next send."""

    def __init__(self, producer: Producer, name: str, account: str) -> None:
        self._producer = producer
        self._name = name
        self._account = account
        self._lookup: Callable[[], QueueRecord | None] = lambda: producer.store.queue(name, account)

    async def _missed(self) -> QueueRecord:
        """Not in the catalogue: the database may know it (made on another node a moment
        ago). Only a miss pays this coroutine; a send finds its queue with ``_lookup``."""
        q = await self._producer.store.lookup(self._name, self._account)
        if q is None:
            raise QueueNotFound(self._name)
        return q

    async def send_batch(
        self, items: Sequence[tuple[Any, Any, Any, Any, Any]], batch_delay: Any
    ) -> dict[str, Any]:
        q = self._lookup() or await self._missed()
        backlog = await self._producer.send(q, items, batch_delay)
        return metrics_dict(backlog)

    async def metrics(self) -> dict[str, Any]:
        q = self._lookup() or await self._missed()
        return metrics_dict(await self._producer.store.backlog(q))
