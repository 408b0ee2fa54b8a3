"""The workerd handler kind: a batch goes to the bridge Worker, which calls the worker's
``queue()`` through ``Fetcher.queue`` and answers workerd's ``FetcherQueueResult``; that
result becomes the batch's marks, so ``ocd.decide`` applies the same precedence as for
Python handlers.

A batch that never reached workerd (it is down or restarting) is handed back without
spending an attempt (``unreached``); once the request was written the handler may have run,
so a lost connection or a timeout is a failed delivery. A timed-out ``queue()`` goes on
running inside workerd (dropping the request does not cancel it): its lease covers the
wall-clock limit and a minute more, and a second delivery may overlap it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from ocd.js.capnp import bridge_binding
from ocd.js.reports import ErrorReports
from ocd.js.wire import BridgeWire, Unreachable
from ocd.pipeline import ABORTED, OUTCOME_OK, UNREACHED, Invoke, Outcome, Route
from ocd.store import Delivery
from runtime import BatchMarks, MessageBatch

log = logging.getLogger(__name__)

_ERROR_CHARS = 1000  # of an error's summary kept with the batch's outcome


class WorkerdKind:
    """``HandlerKind`` of one JS worker: ``session`` reaches the bridge's socket."""

    def __init__(self, worker: str, bridge: Callable[[], Bridge | None]) -> None:
        self.worker = worker
        self.bridge = bridge

    def invoke(self, route: Route, timeout_s: float, abort: asyncio.Event) -> Invoke:
        return WorkerdInvoke(self.worker, self.bridge, timeout_s, abort)


class Bridge:
    """The bridge Worker of one workerd start."""

    def __init__(self, socket_path: str, secret: str, reports: ErrorReports) -> None:
        self.session = aiohttp.ClientSession(  # scheduled()
            connector=aiohttp.UnixConnector(path=socket_path),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        self.headers = {"Authorization": f"Bearer {secret}"}
        self.wire = BridgeWire(socket_path)  # queue batches, every one a POST
        self.wire_headers = f"Authorization: Bearer {secret}\r\n".encode()
        self.reports = reports  # what the worker's handlers threw

    async def close(self) -> None:
        self.wire.close()
        await self.session.close()


class WorkerdInvoke:
    # The bridge decodes text, json and bytes itself, message by message, and reports what
    # it cannot; v8 bodies go to workerd's deserializer whole, so ocd checks them first.
    python_bodies = False
    self_checked = frozenset(("text", "json", "bytes"))

    def __init__(
        self,
        worker: str,
        bridge: Callable[[], Bridge | None],
        timeout_s: float,
        abort: asyncio.Event,
    ) -> None:
        self.worker = worker
        self.bridge = bridge
        self.timeout_s = timeout_s
        self.abort = abort

    async def __call__(self, batch: MessageBatch, deliveries: Sequence[Delivery]) -> Outcome:
        bridge = self.bridge()
        if bridge is None:
            return Outcome(UNREACHED, "workerd is not running")
        frame = _frame(batch, deliveries)
        target = f"/queue/{bridge_binding(self.worker)}"
        post = asyncio.ensure_future(_post(bridge, target, frame))
        abort = asyncio.ensure_future(self.abort.wait())
        try:
            done, _ = await asyncio.wait(
                {post, abort}, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            abort.cancel()
        if post not in done:
            post.cancel()
            if self.abort.is_set():
                return Outcome(ABORTED)
            log.error(
                "queue %s: handler of worker %s exceeded its %.0f s wall-clock limit",
                batch.queue,
                self.worker,
                self.timeout_s,
                extra={"event": "handler_timeout", "worker": self.worker, "queue": batch.queue},
            )
            return Outcome("exceededWallTime", f"exceeded its {self.timeout_s:.0f} s limit")
        try:
            result = post.result()
        except Unreachable as e:  # never reached workerd
            return Outcome(UNREACHED, f"workerd unreachable: {e}")
        except (OSError, EOFError, ValueError) as e:  # it may have run
            return Outcome("exception", f"lost the bridge: {type(e).__name__}: {e}"[:300])
        outcome = _apply(result, batch._marks)
        if outcome.name == OUTCOME_OK.name:
            return outcome
        thrown = bridge.reports.take_batch(self.worker, (d.id for d in deliveries))
        if thrown is not None:  # logged as it arrived, with its stack (worker_error)
            return replace(outcome, error=thrown.summary()[:_ERROR_CHARS])
        log.error(
            "queue %s: handler of worker %s: %s",
            batch.queue,
            self.worker,
            outcome.name,
            extra={
                "event": "handler_failed",
                "worker": self.worker,
                "queue": batch.queue,
                "outcome": outcome.name,
            },
        )
        return outcome


async def _post(bridge: Bridge, target: str, frame: bytes) -> Any:
    status, body = await bridge.wire.post(target, bridge.wire_headers, frame)
    if status != 200:
        raise ValueError(f"bridge answered {status}: {body[:200].decode(errors='replace')}")
    return orjson.loads(body)  # its JSONDecodeError is a ValueError


def _frame(batch: MessageBatch, deliveries: Sequence[Delivery]) -> bytes:
    m = batch.metadata.metrics
    oldest = m.oldestMessageTimestamp
    header = {
        "queue": batch.queue,
        "metrics": {
            "backlogCount": m.backlogCount,
            "backlogBytes": m.backlogBytes,
            "oldestMessageTimestamp": int(oldest.timestamp() * 1000) if oldest else 0,
        },
        "messages": [
            {
                "id": d.id,
                "timestamp": d.sent_ms,
                "attempts": d.attempts,
                "contentType": d.content_type,
                "size": len(d.body),
            }
            for d in deliveries
        ],
    }
    # orjson: a tenth of json's time for these ASCII names and numbers, the same bytes
    head = orjson.dumps(header)
    return b"".join([struct.pack(">I", len(head)), head, *(d.body for d in deliveries)])


def _apply(result: Any, marks: BatchMarks) -> Outcome:
    """workerd's ``FetcherQueueResult`` as the batch's marks, and the outcome."""
    try:
        marks.acks.update(result.get("explicitAcks") or ())
        for r in result.get("retryMessages") or ():
            marks.retries[r["msgId"]] = r.get("delaySeconds")
        marks.ack_all = bool(result.get("ackAll"))
        retry_batch = result.get("retryBatch") or {}
        marks.retry_all = bool(retry_batch.get("retry"))
        marks.retry_all_delay = retry_batch.get("delaySeconds")
        outcome = str(result.get("outcome") or "exception")
        undecodable = tuple((u["id"], str(u["reason"])) for u in result.get("undecodable") or ())
    except (AttributeError, KeyError, TypeError) as e:
        return Outcome("exception", f"the bridge's answer was not understood: {e}")
    if outcome == "ok":
        return Outcome(OUTCOME_OK.name, None, undecodable) if undecodable else OUTCOME_OK
    return Outcome(outcome, f"queue() ended with outcome {outcome}", undecodable)
