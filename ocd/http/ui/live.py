"""Live numbers: one shared snapshot per tick for every open tab, and the last hour of
each queue in memory.

A single task (:meth:`Hub.run`) wakes once a second, reads the store's per-queue counts
once and the Prometheus counters the producer and dispatchers already feed, and keeps:

- per queue, a ring of one point a minute for the last hour (backlog, sent, acked, retried,
  dead-lettered: the sparklines) and a ring of per-second counter values for the last minute
  (the per-minute rates); no query per point;
- per account, the snapshot as JSON, which goes to every subscriber of that account only
  when it changed since the last tick, with an increasing event id (``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ocd.counts import queue_counts
from ocd.http.ui.source import UiSource
from ocd.store import QueueRecord

log = logging.getLogger(__name__)

TICK_S = 1.0  # at most one snapshot a second
KEEPALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream
POINT_EVERY_S = 60  # sparkline resolution
POINTS = 60  # an hour of points
COUNTERS = ("sent", "acked", "retried", "dead_lettered")


@dataclass
class QueueHistory:
    """The last hour of one queue, a point a minute; and the last minute, a sample a tick."""

    points: deque[tuple[float, ...]] = field(
        default_factory=lambda: deque(maxlen=POINTS)
    )  # (at_ms, backlog, sent, acked, retried, dead_lettered) counters cumulative
    seconds: deque[tuple[float, tuple[float, ...]]] = field(
        default_factory=lambda: deque(maxlen=POINT_EVERY_S + 1)
    )

    def per_minute(self) -> dict[str, int]:
        """Counter increase over the last minute (over less, not extrapolated, until the
        hub has run a minute)."""
        if len(self.seconds) < 2:
            return dict.fromkeys(COUNTERS, 0)
        first, last = self.seconds[0][1], self.seconds[-1][1]
        return {k: round(b - a) for k, a, b in zip(COUNTERS, first, last, strict=True)}

    def series(self) -> dict[str, list[float]]:
        """Per-minute backlog and per-minute outcome counts, oldest first."""
        pts = list(self.points)
        out: dict[str, list[float]] = {"backlog": [p[1] for p in pts]}
        for i, name in enumerate(COUNTERS, start=2):
            out[name] = [max(0.0, b[i] - a[i]) for a, b in itertools.pairwise(pts)]
        return out


@dataclass(eq=False)
class Subscriber:
    account: str
    queue: asyncio.Queue[tuple[int, str] | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=4)
    )


class Hub:
    def __init__(self, source: UiSource) -> None:
        self.source = source
        self.history: dict[tuple[str, str], QueueHistory] = {}
        self.subscribers: set[Subscriber] = set()
        self.event_id = 0
        self.latest: dict[str, tuple[int, str]] = {}  # account -> (event id, JSON)
        self.rows: dict[str, list[dict[str, Any]]] = {}  # account -> queue rows
        self.tick_cost_s: deque[float] = deque(maxlen=600)  # loop time of the last ticks
        self._last_point = 0.0
        self._closed = False

    # ---------------------------------------------------------------- subscribers

    def subscribe(self, account: str) -> Subscriber:
        sub = Subscriber(account)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def close(self) -> None:
        """End every stream (shutdown): each gets None."""
        self._closed = True
        for sub in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                sub.queue.put_nowait(None)

    # ---------------------------------------------------------------- ticks

    async def run(self) -> None:
        while not self._closed:
            try:
                await self.tick()
            except Exception as e:  # a store outage must not kill live numbers for good
                log.warning("dashboard snapshot failed: %s", e, extra={"event": "ui_tick_failed"})
            await asyncio.sleep(TICK_S)

    async def tick(self) -> None:
        src = self.source
        now_ms = src.clock()
        stats = await src.store.queue_stats(now_ms)
        started = time.perf_counter()  # loop time from here (the query ran off the loop)
        counters = self._counters()
        point = time.monotonic() - self._last_point >= POINT_EVERY_S
        if point:
            self._last_point = time.monotonic()
        rows: dict[str, list[dict[str, Any]]] = {}
        depth = {(q.account, q.name): src.store.backlog_count(q) for q in src.store.queues()}
        dlq_of = self._dead_letter_queues()
        for q in src.store.queues():
            key = (q.account, q.name)
            backlog = depth[key]
            c = queue_counts(backlog, stats.get(q.key))
            h = self.history.setdefault(key, QueueHistory())
            values = tuple(counters.get((name, *key), 0.0) for name in COUNTERS)
            h.seconds.append((time.monotonic(), values))
            if point or not h.points:
                h.points.append((now_ms, backlog, *values))
            dlq = dlq_of.get(key)
            rows.setdefault(q.account, []).append(
                {
                    "name": q.name,
                    "ready": c.ready,
                    "delayed": c.delayed,
                    "inflight": c.in_flight,
                    "backlog": c.backlog,
                    "dlq": dlq,
                    "dlq_depth": depth.get((q.account, dlq), 0) if dlq else None,
                    "paused": q.settings.delivery_paused,
                    "fifo": bool(getattr(q, "fifo", False)),
                    "rates": h.per_minute(),
                }
            )
        for key in set(self.history) - set(depth):
            del self.history[key]
        self.rows = rows
        for account in {*rows, *(s.account for s in self.subscribers)}:
            body = {
                "queues": rows.get(account, []),
                "tasks": [t.json() for t in src.admin.tasks(account)],
                "state": src.state,
            }
            text = json.dumps(body, separators=(",", ":"), sort_keys=True)
            last = self.latest.get(account)
            if last is not None and last[1] == text:
                continue  # only on change
            self.event_id += 1
            self.latest[account] = (self.event_id, text)
            for sub in [s for s in self.subscribers if s.account == account]:
                with contextlib.suppress(asyncio.QueueFull):  # a slow tab skips a tick
                    sub.queue.put_nowait((self.event_id, text))
        self.tick_cost_s.append(time.perf_counter() - started)

    def _counters(self) -> dict[tuple[str, str, str], float]:
        """(counter, account, queue) -> value, read from the Prometheus counters."""
        out: dict[tuple[str, str, str], float] = {}
        m = self.source.metrics
        for name in COUNTERS:
            for metric in getattr(m, name).collect():
                for s in metric.samples:
                    if s.name.endswith("_total"):
                        out[(name, s.labels["account"], s.labels["queue"])] = s.value
        return out

    def _dead_letter_queues(self) -> dict[tuple[str, str], str]:
        out: dict[tuple[str, str], str] = {}
        for key, wc in self.source.admin.worker_consumers.items():
            if wc.consumer.dead_letter_queue:
                out[key] = wc.consumer.dead_letter_queue
        for q in self.source.store.queues():
            pc = self.source.store.pull_consumer(q)
            if pc is not None and pc.dead_letter_queue:
                out[(q.account, q.name)] = pc.dead_letter_queue
        return out

    def queue_history(self, q: QueueRecord) -> QueueHistory:
        return self.history.get((q.account, q.name)) or QueueHistory()


async def stream(
    request: web.Request,
    hub: Hub,
    account: str,
    headers: dict[str, str],
    allowed: Callable[[], bool] = lambda: True,
) -> web.StreamResponse:
    """One Server-Sent Events stream: the shared snapshot of ``account`` when it changes, at
    most once a tick; a comment every KEEPALIVE_S; after ``Last-Event-ID`` it starts with
    the next change instead of the snapshot the browser has already seen. It ends before
    the first write ``allowed`` refuses (the session's token was removed by a reload)."""
    response = web.StreamResponse(
        headers={
            **headers,
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    sub = hub.subscribe(account)
    try:
        await response.write(b"retry: 3000\n\n")
        latest = hub.latest.get(account)
        if latest is not None and request.headers.get("Last-Event-ID", "") != str(latest[0]):
            await response.write(_event(*latest))
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), KEEPALIVE_S)
            except TimeoutError:
                if not allowed():
                    break
                await response.write(b": keep-alive\n\n")
                continue
            if item is None or not allowed():  # shutdown, or the session has ended
                break
            await response.write(_event(*item))
    except ConnectionResetError:
        pass  # the tab went away
    finally:
        hub.unsubscribe(sub)
    return response


def _event(event_id: int, data: str) -> bytes:
    return f"id: {event_id}\nevent: snapshot\ndata: {data}\n\n".encode()
