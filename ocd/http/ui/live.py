"""Live numbers: one shared snapshot per tick for every open tab, and the last hour of
each queue in memory.

A single task (:meth:`Hub.run`) keeps:

- per queue, a ring of one point a minute for the last hour (backlog, sent, acked, retried,
  dead-lettered: the sparklines), from the backlog the store knows in memory and the
  Prometheus counters the producer and dispatchers already feed; no query per point;
- while a tab watches (a subscriber), a ring of per-second counter values for the last
  minute (the per-minute rates), and per account the snapshot as JSON, with the store's
  per-queue counts read once a second, which goes to every subscriber of that account only
  when it changed since the last tick, with an increasing event id (``Last-Event-ID``).

With nobody watching, the task wakes once a minute, for the points only: an idle daemon
with thousands of queues does no per-queue work a second. The first tab to open wakes it at
once; the rates it shows then start from the last point (over less than a minute, not
extrapolated, until the tab has watched a minute).
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
        self._last_point = 0.0  # monotonic time of the last point
        self._closed = False
        self._wake = asyncio.Event()  # the first subscriber, or close()

    # ---------------------------------------------------------------- subscribers

    def subscribe(self, account: str) -> Subscriber:
        sub = Subscriber(account)
        if not self.subscribers:
            self._wake.set()  # live numbers now, not at the next minute's point
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def close(self) -> None:
        """End every stream (shutdown): each gets None."""
        self._closed = True
        self._wake.set()
        for sub in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                sub.queue.put_nowait(None)

    # ---------------------------------------------------------------- ticks

    async def run(self) -> None:
        watched = False
        while not self._closed:
            resumed = not watched
            watched = bool(self.subscribers)
            try:
                if watched:
                    await self.tick(resumed)
                elif time.monotonic() - self._last_point >= POINT_EVERY_S:
                    self.record(watched=False)
            except Exception as e:  # a store outage must not kill live numbers for good
                log.warning("dashboard snapshot failed: %s", e, extra={"event": "ui_tick_failed"})
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.next_wait_s())

    def next_wait_s(self) -> float:
        """How long the hub sleeps now unless a first tab wakes it: a tick while watched,
        else until the next point."""
        if self.subscribers:
            return TICK_S
        return max(0.0, POINT_EVERY_S - (time.monotonic() - self._last_point))

    def record(self, watched: bool, resumed: bool = False) -> dict[tuple[str, str], int]:
        """The points of every queue, if one is due; while watched, the per-second samples
        too (``resumed``: the first tick after nobody watched, whose samples start again
        from the last point). Each queue's backlog, from memory."""
        src = self.source
        now_ms = src.clock()
        now = time.monotonic()
        counters = self._counters()
        last_point = self._last_point
        point = now - last_point >= POINT_EVERY_S
        if point:
            self._last_point = now
        depth = {(q.account, q.name): src.store.backlog_count(q) for q in src.store.queues()}
        for key, backlog in depth.items():
            h = self.history.setdefault(key, QueueHistory())
            values = tuple(counters.get((name, *key), 0.0) for name in COUNTERS)
            if resumed:
                h.seconds.clear()
                if h.points and not point:  # the last point is less than a minute old
                    h.seconds.append((last_point, tuple(h.points[-1][2:])))
            if watched:
                h.seconds.append((now, values))
                while now - h.seconds[0][0] > POINT_EVERY_S:  # a seed older than a minute
                    h.seconds.popleft()
            if point or not h.points:
                h.points.append((now_ms, backlog, *values))
        for key in set(self.history) - set(depth):
            del self.history[key]
        return depth

    async def tick(self, resumed: bool = False) -> None:
        src = self.source
        stats = await src.store.queue_stats(src.clock())
        started = time.perf_counter()  # loop time from here (the query ran off the loop)
        depth = self.record(watched=True, resumed=resumed)
        rows: dict[str, list[dict[str, Any]]] = {}
        dlq_of = self._dead_letter_queues()
        for q in src.store.queues():
            key = (q.account, q.name)
            backlog = depth.get(key, 0)
            c = queue_counts(backlog, stats.get(q.key))
            h = self.history[key]
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
