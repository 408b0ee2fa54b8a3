"""The queue API worker code sees: the producer binding and the consumer's batch.

Names follow Cloudflare's (``sendBatch``, ``ackAll``, ``delaySeconds``); snake-case aliases
(``send_batch``, ``ack_all``, ``delay_seconds``, ``content_type``) work too.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime._jsdict import JsDict
from runtime.values import as_js_value

log = logging.getLogger("workers.queue")

_MISSING: Any = object()


class QueueBackend(Protocol):
    """What ocd plugs in behind a binding; worker code never sees it."""

    async def send_batch(
        self, items: Sequence[tuple[Any, Any, Any, Any, Any]], batch_delay: Any
    ) -> dict[str, Any]:
        """Store ``(body, contentType, delaySeconds, messageGroupId,
        messageDeduplicationId)`` items (``None`` = unset) atomically and return the
        queue's backlog metrics, camel-cased."""
        ...

    async def metrics(self) -> dict[str, Any]: ...


def _option(options: Mapping[str, Any] | None, camel: str, snake: str, *kwargs: Any) -> Any:
    for value in kwargs:
        if value is not _MISSING:
            return value
    if options is not None:
        if camel in options:
            return options[camel]
        if snake in options:
            return options[snake]
    return None


class Queue:
    """A producer binding, ``env.MY_QUEUE``.

    ``await send(body, contentType="json", delaySeconds=0)`` returns once the message is
    durably stored; ``await sendBatch([{"body": ...}, ...])`` stores all or nothing.
    """

    def __init__(self, name: str, backend: QueueBackend) -> None:
        self._name = name
        self._backend = backend

    async def send(
        self,
        body: Any = _MISSING,
        options: Mapping[str, Any] | None = None,
        /,
        *,
        contentType: Any = _MISSING,
        delaySeconds: Any = _MISSING,
        messageGroupId: Any = _MISSING,
        messageDeduplicationId: Any = _MISSING,
        content_type: Any = _MISSING,
        delay_seconds: Any = _MISSING,
        message_group_id: Any = _MISSING,
        message_deduplication_id: Any = _MISSING,
    ) -> JsDict:
        if body is _MISSING:
            raise TypeError("Message body cannot be undefined")
        ctype = _option(options, "contentType", "content_type", contentType, content_type)
        delay = _option(options, "delaySeconds", "delay_seconds", delaySeconds, delay_seconds)
        group = _option(
            options, "messageGroupId", "message_group_id", messageGroupId, message_group_id
        )
        dedup = _option(
            options,
            "messageDeduplicationId",
            "message_deduplication_id",
            messageDeduplicationId,
            message_deduplication_id,
        )
        metrics = await self._backend.send_batch([(body, ctype, delay, group, dedup)], None)
        return JsDict({"metadata": JsDict({"metrics": JsDict(metrics)})})

    async def sendBatch(
        self,
        messages: Iterable[Mapping[str, Any]],
        options: Mapping[str, Any] | None = None,
        /,
        *,
        delaySeconds: Any = _MISSING,
        delay_seconds: Any = _MISSING,
    ) -> JsDict:
        items: list[tuple[Any, Any, Any, Any, Any]] = []
        for m in messages:
            # a dict first: the ABC check costs five times the type's
            if type(m) is not dict and not isinstance(m, Mapping):
                raise TypeError(
                    "sendBatch() expects message objects like {'body': ...}, got "
                    f"{type(m).__name__}"
                )
            if "body" not in m:
                raise TypeError("Message body cannot be undefined")
            if len(m) == 1:  # a body alone, the usual message: no option to look for
                items.append((m["body"], None, None, None, None))
                continue
            items.append(
                (
                    m["body"],
                    _option(m, "contentType", "content_type"),
                    _option(m, "delaySeconds", "delay_seconds"),
                    _option(m, "messageGroupId", "message_group_id"),
                    _option(m, "messageDeduplicationId", "message_deduplication_id"),
                )
            )
        if not items:
            raise TypeError("sendBatch() requires at least one message")
        delay = _option(options, "delaySeconds", "delay_seconds", delaySeconds, delay_seconds)
        metrics = await self._backend.send_batch(items, delay)
        return JsDict({"metadata": JsDict({"metrics": JsDict(metrics)})})

    send_batch = sendBatch

    async def metrics(self) -> JsDict:
        """``backlogCount``, ``backlogBytes`` and ``oldestMessageTimestamp`` (aware UTC
        datetime, or None for an empty queue)."""
        return JsDict(await self._backend.metrics())

    def __repr__(self) -> str:
        return f"<Queue binding {self._name!r}>"


def _delay_option(options: Any, delaySeconds: Any, delay_seconds: Any) -> int | None:
    if isinstance(options, Mapping):
        value = _option(options, "delaySeconds", "delay_seconds", delaySeconds, delay_seconds)
    elif options is not None and options is not _MISSING:
        raise TypeError("retry options must be a dict like {'delaySeconds': 30}")
    else:
        value = _option(None, "", "", delaySeconds, delay_seconds)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 86400:
        raise ValueError(f"delaySeconds must be an integer between 0 and 86400, got {value!r}")
    return value


@dataclass(slots=True)
class BatchMarks:
    """What the handler asked for, in workerd's terms; ocd decides the outcome from it."""

    ack_all: bool = False
    retry_all: bool = False
    retry_all_delay: int | None = None
    acks: set[str] = field(default_factory=set)
    retries: dict[str, int | None] = field(default_factory=dict)


class Message:
    """One delivered message: ``id``, ``timestamp``, ``body``, ``attempts`` (from 1); on a
    FIFO queue also ``groupId``, ``sequenceNumber`` and ``deduplicationId`` (``None`` on a
    standard queue; snake-case aliases ``group_id``, ``sequence_number``,
    ``deduplication_id``)."""

    __slots__ = (
        "_marks",
        "attempts",
        "body",
        "deduplicationId",
        "groupId",
        "id",
        "sequenceNumber",
        "timestamp",
    )

    def __init__(
        self,
        id: str,
        timestamp: dt.datetime,
        body: Any,
        attempts: int,
        marks: BatchMarks,
        group_id: str | None = None,
        sequence_number: int | None = None,
        deduplication_id: str | None = None,
    ) -> None:
        self.id = id
        self.timestamp = timestamp
        self.body = as_js_value(body)  # with to_py(), as Python Workers code expects
        self.attempts = attempts
        self._marks = marks
        self.groupId = group_id
        self.sequenceNumber = sequence_number
        self.deduplicationId = deduplication_id

    @property
    def group_id(self) -> str | None:
        return self.groupId

    @property
    def sequence_number(self) -> int | None:
        return self.sequenceNumber

    @property
    def deduplication_id(self) -> str | None:
        return self.deduplicationId

    def ack(self) -> None:
        """Acknowledge this message: it will not be delivered again, even if the handler
        later raises."""
        m = self._marks
        if m.ack_all:
            return
        if m.retry_all:
            log.warning("Calling ack() on a message after calling retryAll() has no effect.")
            return
        if self.id in m.retries:
            log.warning("Calling ack() on a message after calling retry() has no effect.")
            return
        m.acks.add(self.id)

    def retry(
        self,
        options: Mapping[str, Any] | None = None,
        /,
        *,
        delaySeconds: Any = _MISSING,
        delay_seconds: Any = _MISSING,
    ) -> None:
        """Deliver this message again, after ``delaySeconds`` (default: the consumer's
        ``retry_delay``)."""
        delay = _delay_option(options, delaySeconds, delay_seconds)
        m = self._marks
        if m.ack_all:
            log.warning("Calling retry() on a message after calling ackAll() has no effect.")
            return
        if self.id in m.acks:
            log.warning("Calling retry() on a message after calling ack() has no effect.")
            return
        m.retries[self.id] = delay

    def __repr__(self) -> str:
        return f"<Message {self.id} attempts={self.attempts}>"


class MessageBatch:
    """What ``queue(batch, env, ctx)`` receives."""

    def __init__(
        self, queue: str, messages: list[Message], metrics: dict[str, Any], marks: BatchMarks
    ) -> None:
        self.queue = queue
        self.messages = messages
        self.metadata = JsDict.deep({"metrics": metrics})
        self._marks = marks

    def ackAll(self) -> None:
        """Acknowledge every message not already marked for retry."""
        m = self._marks
        if m.retry_all:
            log.warning("Calling ackAll() on a batch after calling retryAll() has no effect.")
            return
        m.ack_all = True

    def retryAll(
        self,
        options: Mapping[str, Any] | None = None,
        /,
        *,
        delaySeconds: Any = _MISSING,
        delay_seconds: Any = _MISSING,
    ) -> None:
        """Retry every message not already acknowledged."""
        delay = _delay_option(options, delaySeconds, delay_seconds)
        m = self._marks
        if m.ack_all:
            log.warning("Calling retryAll() on a batch after calling ackAll() has no effect.")
            return
        m.retry_all = True
        m.retry_all_delay = delay

    ack_all = ackAll
    retry_all = retryAll

    def __repr__(self) -> str:
        return f"<MessageBatch {self.queue!r} {len(self.messages)} messages>"
