"""workerd's queue producer protocol, served to workerd alone on a private unix socket.

``env.QUEUE.send()`` / ``sendBatch()`` / ``metrics()`` in a JS Worker become ``POST
/message``, ``POST /batch`` and ``GET /metrics`` to the external service of its binding,
which injects ``X-Ocd-Worker``, ``X-Ocd-Binding`` and the start's secret: a request is tied
to one configured binding, and nothing else can post into a queue through the socket.

A send is answered only once its messages are committed, with exactly the reply workerd
needs for ``send()`` to resolve (a 200 with the whole ``metadata.metrics``); a refused one
with Cloudflare's cause and code in ``CF-Queues-Error-Cause`` / ``-Code``.
"""

from __future__ import annotations

import hmac
import logging
from binascii import a2b_base64
from collections.abc import Mapping
from typing import Any

import orjson

from ocd import codec, limits
from ocd.errors import (
    QueueNotFound,
    QueueSendError,
    StoreError,
    StoreFull,
)
from ocd.js.wire import Answer, Asked, Handler
from ocd.producer import (
    MAX_BATCH_MESSAGES,
    MESSAGE_METADATA_INVALID,
    Producer,
)
from ocd.store import Backlog

log = logging.getLogger(__name__)

UNKNOWN_ERROR = limits.INTERNAL  # workerd's default code
UNAVAILABLE = limits.SERVICE_UNAVAILABLE
MAX_REQUEST_BYTES = 1024 * 1024  # a batch of 256,000 bytes in base64 and JSON, with room
_FORMATS = frozenset(codec.CONTENT_TYPES)  # a contentType already canonical


class ProducerEndpoint:
    """``bindings``: (worker, binding) -> (queue, account)."""

    def __init__(
        self,
        producer: Producer | None,
        secret: str,
        bindings: Mapping[tuple[str, str], tuple[str, str]],
    ) -> None:
        self.producer = producer
        self.secret = f"Bearer {secret}".encode()
        self.bindings = dict(bindings)

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The protocol's routes, for ``ocd.js.wire.routed``."""
        return {
            ("POST", "/message"): _answering_refusals(self.message),
            ("POST", "/batch"): _answering_refusals(self.batch),
            ("GET", "/metrics"): _answering_refusals(self.metrics),
        }

    def _live(self) -> Producer:
        if self.producer is None:  # check-config's trial start of workerd
            raise _refused(503, "ocd is only checking this config", UNAVAILABLE)
        return self.producer

    async def _queue(self, asked: Asked) -> Any:
        headers = asked.headers
        given = headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, self.secret):
            raise _refused(403, "not allowed", UNKNOWN_ERROR)
        key = (headers.get("x-ocd-worker", ""), headers.get("x-ocd-binding", ""))
        target = self.bindings.get(key)
        if target is None:
            raise _refused(403, f"no producer binding {key[1]} of worker {key[0]}", UNKNOWN_ERROR)
        queue, account = target
        store = self._live().store
        q = store.queue(queue, account) or await store.lookup(queue, account)
        if q is None:
            raise _refused(404, f"queue {queue} does not exist", 10104)
        return q

    async def message(self, asked: Asked) -> Answer:
        q = await self._queue(asked)
        fmt = _format(asked.headers.get("x-msg-fmt"))
        delay = _delay(asked.headers.get("x-msg-delay-secs"))
        return await self._send(q, [(asked.body, fmt, delay, None, None)], None)

    async def batch(self, asked: Asked) -> Answer:
        q = await self._queue(asked)
        batch_delay = _delay(asked.headers.get("x-msg-delay-secs"))
        try:
            raw = orjson.loads(asked.body)  # its JSONDecodeError is a ValueError
            messages = raw["messages"]
            if not isinstance(messages, list) or not messages:
                raise ValueError("no messages")
        except (ValueError, KeyError, TypeError) as e:
            raise _refused(400, f"invalid batch: {e}", MESSAGE_METADATA_INVALID) from None
        if len(messages) > MAX_BATCH_MESSAGES:
            raise _refused(
                413,
                f"batch message count of {len(messages)} exceeds limit of {MAX_BATCH_MESSAGES}",
                10206,
            )
        items = []
        for m in messages:
            try:
                # base64.b64decode(validate=True) without its Python wrapper; a ValueError
                # is a non-ASCII str as well as a binascii.Error
                body = a2b_base64(m["body"], strict_mode=True)
            except (KeyError, TypeError, ValueError):
                raise _refused(400, "invalid message body", MESSAGE_METADATA_INVALID) from None
            fmt = m.get("contentType")
            if type(fmt) is not str or fmt not in _FORMATS:
                fmt = _format(fmt)
            items.append((body, fmt, m.get("delaySecs"), None, None))
        return await self._send(q, items, batch_delay)

    async def metrics(self, asked: Asked) -> Answer:
        q = await self._queue(asked)
        b = await self._live().store.backlog(q)
        return Answer(
            200,
            orjson.dumps(
                {
                    "backlogCount": b.count,
                    "backlogBytes": b.bytes,
                    "oldestMessageTimestamp": b.oldest_ms,
                }
            ),
        )

    async def _send(self, q: Any, items: list[Any], batch_delay: int | None) -> Answer:
        """Store ``items``, their bodies as workerd sent them."""
        try:
            backlog = await self._live().send(q, items, batch_delay, encoded=True)
        except QueueSendError as e:
            raise _refused(400, e.cause, e.code) from None
        except TypeError as e:  # a FIFO queue's keys, a content type
            raise _refused(400, str(e), MESSAGE_METADATA_INVALID) from None
        except QueueNotFound as e:
            raise _refused(404, f"queue {e} does not exist", 10104) from None
        except StoreFull as e:
            raise _refused(507, f"storage full: {e}", UNAVAILABLE) from None
        except StoreError as e:
            raise _refused(503, f"Service temporarily unavailable: {e}", UNAVAILABLE) from None
        return sent_reply(backlog)


def sent_reply(b: Backlog) -> Answer:
    """The reply that makes ``send()`` resolve: every metric present, numbers always."""
    body = (
        '{"metadata":{"metrics":{'
        f'"backlogCount":{b.count:d},"backlogBytes":{b.bytes:d},'
        f'"oldestMessageTimestamp":{b.oldest_ms:d}}}}}}}'
    )
    return Answer(200, body.encode())


def _format(value: object) -> str:
    """The content type of ``X-Msg-Fmt`` / ``contentType``; none given means ``v8`` (what
    workerd sends without the ``queues_json_messages`` flag)."""
    if value is None:
        return "v8"
    try:
        return codec.normalize_content_type(value)
    except TypeError as e:
        raise _refused(400, str(e), MESSAGE_METADATA_INVALID) from None


def _delay(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)  # range checked by the producer, with Cloudflare's error
    except ValueError:
        raise _refused(
            400, f"delaySeconds must be an integer, got {value!r}", MESSAGE_METADATA_INVALID
        ) from None


class _Refusal(Exception):
    def __init__(self, status: int, cause: str, code: int) -> None:
        super().__init__(cause)
        self.status = status
        self.cause = cause
        self.code = code


def _refused(status: int, cause: str, code: int) -> _Refusal:
    return _Refusal(status, cause, code)


def _answering_refusals(handler: Handler) -> Handler:
    """``handler``, a refusal answered as workerd reads one: the status, and the cause and
    code in the headers (its ``send()`` rejects with "<cause> (<code>)"; before
    compatibility date 2026-03-12 with the status text, which carries the cause too)."""

    async def answer(asked: Asked) -> Answer:
        try:
            return await handler(asked)
        except _Refusal as r:
            cause = " ".join(r.cause.split())[:300]
            ascii_cause = cause.encode("ascii", "replace").decode()
            return Answer(
                r.status,
                orjson.dumps({"error": cause, "code": r.code}),
                headers=(
                    ("CF-Queues-Error-Cause", ascii_cause),
                    ("CF-Queues-Error-Code", str(r.code)),
                ),
                reason=ascii_cause,
            )

    return answer
