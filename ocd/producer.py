"""send / sendBatch semantics shared by worker bindings and (later) the REST API.

Everything is validated and encoded before anything is stored, so a rejected batch leaves
no trace; the call returns only after the store has committed the messages.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from ocd import codec
from ocd.clock import Clock, wall_ms
from ocd.decide import send_delay
from ocd.errors import QueueNotFound, QueueSendError
from ocd.metrics import Metrics
from ocd.store import Backlog, NewMessage, QueueRecord, Store

MAX_MESSAGE_BYTES = 128_000
MAX_BATCH_MESSAGES = 100
MAX_BATCH_BYTES = 256_000
MAX_DELAY_S = 86_400

# Cloudflare's error codes (reference 1.5)
MESSAGE_METADATA_INVALID = 10203
MESSAGE_SIZE_OUT_OF_BOUNDS = 10204
BATCH_SIZE_OUT_OF_BOUNDS = 10205
BATCH_COUNT_OUT_OF_BOUNDS = 10206


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


# Message ids need to be unique, not secret (leases and refs are signed separately), and a
# getrandom() system call per message costs more than the rest of a send's encoding.
_ids = random.Random(os.urandom(32))


def new_message_id() -> str:
    return f"{_ids.getrandbits(128):032x}"


def metrics_dict(b: Backlog) -> dict[str, Any]:
    """Backlog as the binding reports it (camelCase, aware UTC datetime or None)."""
    oldest = dt.datetime.fromtimestamp(b.oldest_ms / 1000, dt.UTC) if b.oldest_ms else None
    return {"backlogCount": b.count, "backlogBytes": b.bytes, "oldestMessageTimestamp": oldest}


class Producer:
    def __init__(
        self, store: Store, clock: Clock = wall_ms, metrics: Metrics | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self._sent: dict[tuple[str, str], Any] = {}  # (account, queue) -> labelled counter

    async def send(
        self,
        queue: QueueRecord,
        items: Sequence[tuple[Any, Any, Any]],
        batch_delay: Any = None,
    ) -> Backlog:
        """Store ``(body, content_type, delay_s)`` items, all or none."""
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
        for body, ctype, delay in items:
            ctype = codec.normalize_content_type(ctype)
            data = codec.encode(body, ctype)
            if len(data) > MAX_MESSAGE_BYTES:
                raise QueueSendError(
                    f"message length of {len(data)} bytes exceeds limit of {MAX_MESSAGE_BYTES}",
                    MESSAGE_SIZE_OUT_OF_BOUNDS,
                )
            total += len(data)
            delay_s = send_delay(check_delay(delay), batch_delay, queue_delay)
            messages.append(NewMessage(new_message_id(), ctype, data, now, now + delay_s * 1000))
        if total > MAX_BATCH_BYTES:
            raise QueueSendError(
                f"batch size of {total} bytes exceeds limit of {MAX_BATCH_BYTES}",
                BATCH_SIZE_OUT_OF_BOUNDS,
            )
        if self.metrics is None:
            return await self.store.enqueue(queue, messages)
        started = time.perf_counter()
        backlog = await self.store.enqueue(queue, messages)
        self.metrics.send_commit.observe(time.perf_counter() - started)
        labels = (queue.account, queue.name)
        counter = self._sent.get(labels)
        if counter is None:
            counter = self._sent[labels] = self.metrics.sent.labels(*labels)
        counter.inc(len(messages))
        return backlog

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
        self, items: Sequence[tuple[Any, Any, Any]], batch_delay: Any
    ) -> dict[str, Any]:
        q = self._lookup() or await self._missed()
        backlog = await self._producer.send(q, items, batch_delay)
        return metrics_dict(backlog)

    async def metrics(self) -> dict[str, Any]:
        q = self._lookup() or await self._missed()
        return metrics_dict(await self._producer.store.backlog(q))
