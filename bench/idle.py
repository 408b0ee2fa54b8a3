"""idle_queues (issue 39): what a daemon costs with many queues and no traffic at all.

A daemon with 10,000 queues, each consumed by the bench worker, started on a fresh data
directory (which creates the queues) and then again on the same one (a restart); between,
nothing is sent. Reported for it and for its peer, the same daemon with 10 queues, run by
run: ``startup_s`` (the start until ``readyz`` answers 200, queues created),
``restart_s`` (the same on the existing database), ``settle_s`` (after ready, until the
start's own work is over: a second under 5 % of a core) and ``idle_cpu_pct`` (the daemon's
CPU over 35 s of no traffic after that, as % of one core). Nobody has the
dashboard open: what runs is what an idle service runs. ``pg_idle_queues``: the same on
PostgreSQL (a fresh database of the bench's server for each daemon).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from harness import Bench, Consumer, Setup

QUEUES = 10_000
PEER = 10
# After readyz, the start's own work (the first sweep and points; on PostgreSQL a LISTEN a
# queue): done when a second passes under SETTLED_PCT of a core, or SETTLE_MAX_S.
SETTLED_PCT = 5.0
SETTLE_MAX_S = 120.0


async def settle(cpu_s: Callable[[], float]) -> float:
    """Seconds until the daemon's own start work is over (see SETTLED_PCT)."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_MAX_S:
        cpu0, t0 = cpu_s(), time.monotonic()
        await asyncio.sleep(1.0)
        if 100 * (cpu_s() - cpu0) / (time.monotonic() - t0) < SETTLED_PCT:
            break
    return time.monotonic() - started


async def idle_queues_run(
    bench: Bench, name: str, run: int, quick: bool, store_of: Callable[[str], Any]
) -> dict[str, Any]:
    """``store_of(label)``: a context giving the DSN of a fresh database, or None (SQLite)."""
    window_s = 5.0 if quick else 35.0  # longer than a dispatcher's fallback look (30 s)
    out: dict[str, Any] = {}
    for label, n in (("peer", PEER), ("many", QUEUES)):
        with bench.workdir(f"{name}-{label}") as work, store_of(f"{name}-{label}") as dsn:
            consumers = tuple(Consumer(f"idle-{i}") for i in range(n))
            setup = Setup(work / "data", {"QUEUE": "idle-0"}, consumers, dsn=dsn)
            async with bench.daemon(f"{name}-{label}-{run}", work, setup) as d:
                startup_s = d.startup_s
                settle_s = await settle(d.cpu_s)
                cpu0, t0 = d.cpu_s(), time.monotonic()
                await asyncio.sleep(window_s)
                idle_pct = 100 * (d.cpu_s() - cpu0) / (time.monotonic() - t0)
            async with bench.daemon(f"{name}-{label}-{run}-again", work, setup) as d:
                restart_s = d.startup_s
        out[label] = {
            "queues": n,
            "startup_s": round(startup_s, 2),
            "restart_s": round(restart_s, 2),
            "settle_s": round(settle_s, 1),
            "idle_cpu_pct": round(idle_pct, 2),
        }
    return out
