"""The dashboard's event stream and headers, over real HTTP (the browser suite drives the
pages themselves)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.helpers import eventually
from tests.integration.rest import Rest

EVENTS = "/__ocd/ui/events"


async def next_event(r: aiohttp.ClientResponse) -> dict[str, Any]:
    """The next ``snapshot`` event of the stream: its id and data (comments skipped)."""
    event: dict[str, Any] = {}
    async for raw in r.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("id: "):
            event["id"] = int(line[4:])
        elif line.startswith("data: "):
            event["data"] = json.loads(line[6:])
        elif line == "" and "data" in event:
            return event
    raise AssertionError("the stream ended")


def backlog_of(event: dict[str, Any], queue: str) -> int:
    return next(q["backlog"] for q in event["data"]["queues"] if q["name"] == queue)


async def test_a_stream_starts_with_the_snapshot_and_resumes_after_last_event_id(start_daemon):
    d = await start_daemon()
    url = d.base + EVENTS
    async with d.session.get(url, timeout=aiohttp.ClientTimeout(total=20)) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        assert r.headers["Cache-Control"] == "no-store"
        first = await next_event(r)
    assert backlog_of(first, "jobs") == 0
    headers = {"Last-Event-ID": str(first["id"])}
    async with d.session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=20)) as r:
        await Rest(d).push("jobs", {"n": 1})
        resumed = await next_event(r)  # not the one it has seen: the next change
    assert resumed["id"] > first["id"] and backlog_of(resumed, "jobs") == 1


async def test_pages_carry_a_strict_csp_and_no_store(start_daemon):
    d = await start_daemon()
    async with d.session.get(d.base + "/__ocd/ui/") as r:
        assert r.status == 200
        csp = r.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Cache-Control"] == "no-store"
    async with d.session.get(d.base + "/__ocd/ui/static/ui.js") as r:
        assert r.status == 200 and "immutable" in r.headers["Cache-Control"]


async def test_the_dashboard_can_be_turned_off(start_daemon):
    d = await start_daemon(queues="[ui]\nenabled = false\n")
    async with d.session.get(d.base + "/__ocd/ui/") as r:
        assert r.status == 404  # the worker routes answer: no dashboard


async def test_with_no_tab_open_the_dashboard_reads_no_queue_counts_until_one_opens(
    start_daemon,
):
    d = await start_daemon()
    store, hub = d.daemon.store, d.daemon.ui.hub
    reads = []
    counts = store.queue_stats

    async def counted(now_ms: int) -> Any:
        reads.append(now_ms)
        return await counts(now_ms)

    store.queue_stats = counted
    await eventually(lambda: ("local", "jobs") in hub.history, timeout=10)  # its first point
    # Nobody watches: the next wake is the next minute's point, and nothing was read per queue
    # (before, the hub read every queue's counts each second for no one).
    assert hub.next_wait_s() > 30 and reads == []
    url = d.base + EVENTS
    async with d.session.get(url, timeout=aiohttp.ClientTimeout(total=20)) as r:
        first = await next_event(r)  # at once, not at the next point a minute away
        assert backlog_of(first, "jobs") == 0 and reads
        assert hub.next_wait_s() == 1.0  # a tick a second while a tab watches
        await Rest(d).push("jobs", {"n": 1})
        assert backlog_of(await next_event(r), "jobs") == 1
