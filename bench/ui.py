"""The dashboard scenarios (``ui``): a 1,000,000-message SQLite queue, then

* every page and API call the UI makes, timed from the bench process (``ui_*_ms``: median
  and p99 over ``UI_REPEATS`` calls each, after one warm-up call);
* the live hub's tick with 20 open event streams while messages keep arriving (so every
  tick has a change to send): loop time per tick, from the daemon's ``/__ocd/ui/live-stats``;
* the send path with and without 20 event streams open, in the same run on the same
  daemon (``e2e`` produce-and-consume of 50,000 messages through another queue, in blocks
  that alternate): each block with the streams over the two without either side of it,
  the median of those (``ui_send_ratio``, at least 0.97).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import TYPE_CHECKING, Any

import aiohttp
from harness import Bench, BenchError, Consumer, Daemon, Setup, percentile, timeout_for

if TYPE_CHECKING:
    from run import Sizes

UI = "/__ocd/ui"
API = "/client/v4/accounts/local/queues"
UI_REPEATS = 40
TABS = 20
SEND_BLOCKS = 5  # blocks with streams, each between two blocks without


async def timed(session: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> float:
    started = time.perf_counter()
    async with session.request(method, url, **kw) as r:
        await r.read()
        if r.status != 200:
            raise BenchError(f"{method} {url}: {r.status}")
    return (time.perf_counter() - started) * 1000


async def calls(d: Daemon, session: aiohttp.ClientSession) -> dict[str, tuple[str, str, dict]]:
    """Every request the UI makes on a 1M queue: name -> (method, url, kwargs)."""
    base = d.url
    page = f"{base}{API}/deep/messages/browse"
    async with session.post(page, json={"limit": 100, "order": "oldest"}) as r:
        first = (await r.json())["result"]
    mid_cursor = first["cursor"]
    seq = first["messages"][50]["seq"]
    q = f"{base}{UI}/queues/deep"
    return {
        "home": ("GET", f"{base}{UI}/", {}),
        "queue": ("GET", q, {}),
        "queue_newest_100": ("GET", q + "?order=newest&limit=100", {}),
        "queue_next_page": ("GET", q + f"?limit=100&cursor={mid_cursor}", {}),
        "queue_filtered": ("GET", q + "?state=ready&attempts=0&limit=50", {}),
        "queue_time_range": ("GET", q + "?from=2000-01-01T00:00&to=2100-01-01T00:00", {}),
        "queue_search": ("GET", q + "?q=needle-not-there", {}),
        "message": ("GET", f"{q}/messages/{seq}", {}),
        "message_fragment": ("GET", f"{q}/messages/{seq}?fragment=1", {}),
        "consumers": ("GET", f"{base}{UI}/consumers", {}),
        "workers": ("GET", f"{base}{UI}/workers", {}),
        "api_browse": ("POST", page, {"json": {"limit": 100, "cursor": mid_cursor}}),
        "api_search": ("POST", f"{base}{API}/deep/messages/search", {"json": {"query": "x"}}),
    }


async def stream(session: aiohttp.ClientSession, url: str, seen: list[int]) -> None:
    async with session.get(url) as r:
        async for line in r.content:
            if line.startswith(b"id:"):
                seen.append(1)


@contextlib.asynccontextmanager
async def tabs(d: Daemon, n: int) -> Any:
    """``n`` open event streams, as ``n`` browser tabs would hold."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    seen: list[int] = []
    tasks = [asyncio.create_task(stream(session, d.url + UI + "/events", seen)) for _ in range(n)]
    try:
        deadline = time.monotonic() + 10
        while (await d.get(UI + "/live-stats"))["subscribers"] < n:
            if time.monotonic() > deadline:
                raise BenchError("the event streams did not open")
            await asyncio.sleep(0.05)
        yield seen
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()


async def produce_and_consume(d: Daemon, n: int) -> float:
    spec = {"mode": "batch", "total": n, "tasks": 4, "binding": "QUEUE", "reset": True}
    sent = await d.post("/produce", spec)
    stats = await d.wait_stats(lambda s: s["done_at"] is not None, timeout_for(n))
    return n / (stats["done_at"] - sent["produce_started_at"])


async def ui(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    deep = sizes.backlog_deep
    with bench.workdir("ui") as work:
        setup = Setup(work / "data", {"DEEP": "deep", "QUEUE": "bench"}, (Consumer("bench"),))
        async with bench.daemon(f"ui-{run}", work, setup) as d:
            spec = {"mode": "batch", "total": deep, "tasks": sizes.fill_tasks, "binding": "DEEP"}
            await d.post("/produce", spec)
            out: dict[str, Any] = {"messages": deep}
            async with aiohttp.ClientSession() as s:
                for name, (method, url, kw) in (await calls(d, s)).items():
                    await timed(s, method, url, **kw)  # warm-up
                    ms = [await timed(s, method, url, **kw) for _ in range(UI_REPEATS)]
                    out[name] = {"p50_ms": round(statistics.median(ms), 2),
                                 "p99_ms": round(percentile(ms, 99), 2)}  # fmt: skip
            pages = [v for v in out.values() if isinstance(v, dict)]
            out["worst_p50_ms"] = max(v["p50_ms"] for v in pages)
            out["worst_p99_ms"] = max(v["p99_ms"] for v in pages)
            out.update(await sse_and_sends(d, sizes))
    return out


async def sse_and_sends(d: Daemon, sizes: Sizes) -> dict[str, Any]:
    n = max(sizes.e2e_total // 4, 5_000)
    without, with_tabs = [], []
    await produce_and_consume(d, n // 4)  # warm-up
    without.append(await produce_and_consume(d, n))
    for _ in range(SEND_BLOCKS):
        async with tabs(d, TABS) as seen:
            with_tabs.append(await produce_and_consume(d, n))
            events = len(seen)
        without.append(await produce_and_consume(d, n))
    live = await d.get(UI + "/live-stats")
    # Each block with streams against the two without either side of it: the machine's
    # drift over the run cancels out.
    ratios = [w / ((a + b) / 2) for w, a, b in zip(with_tabs, without, without[1:], strict=False)]
    return {
        "send_msg_s_without_tabs": round(statistics.median(without)),
        "send_msg_s_with_tabs": round(statistics.median(with_tabs)),
        "block_ratios": [round(r, 3) for r in ratios],
        "send_ratio": round(statistics.median(ratios), 3),
        "events_received": events,
        "tick_ms_p50": live["tick_ms_p50"],
        "tick_ms_p99": live["tick_ms_p99"],
        "tick_ms_max": live["tick_ms_max"],
        "tabs": TABS,
    }
