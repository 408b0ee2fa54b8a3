"""ocd's benchmarks: real daemons (durability "full", fresh data dirs) driven over HTTP.

    .venv/bin/python bench/run.py [--quick] [--runs N] [--only e2e_batch,latency] [--profile]

Scenarios (each run starts its own daemon(s); producers run inside the daemon, in the bench
worker ``bench/apps/bench_worker.py``, which timestamps everything with ``perf_counter``):

* e2e_batch   -- sendBatch of 100 from a few tasks -> consumer (batch 100, timeout 0);
                 messages/s from the start of producing until the consumer counted them all;
* single_send -- single send() calls from 100 tasks; messages/s of the send phase, and e2e;
* latency     -- one send every few ms; send -> handler latency p50/p99/max;
* backlog     -- fill a queue with no consumer, restart with one, time the first messages
                 (at most 30 s of them); consume rate and RSS, deep backlog against shallow.

The REST API scenarios (``rest.py``) drive ``/client/v4`` from this process instead
(``load.py``: one aiohttp session, a keep-alive connection per client, bodies serialised
beforehand):

* http_push_batch  -- batch pushes of 100 from 50 clients; messages/s;
* http_pull_ack    -- a few pullers pull 100 and ack them in one request, from a pre-filled
                      queue with a pull consumer; messages/s;
* http_push_single -- single pushes from 50 clients, requests/s, and in the same run the
                      same requests against a trivial aiohttp handler (``apps/
                      trivial_server.py``), in alternating blocks: ocd's rate over the
                      trivial one; then the same from a lean raw-socket generator.

Writes ``bench/results/latest.json`` and prints it, then one ``SUMMARY`` line. Exits 1 only
when a scenario could not be measured; missed targets are marked FAIL in the summary.
With ``--profile`` every daemon's event-loop thread is profiled with cProfile into
``bench/results/profile-<scenario>-<run>.prof``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import uvloop
from harness import (
    RESULTS,
    Bench,
    BenchError,
    Consumer,
    CpuWindow,
    Daemon,
    Setup,
    percentile,
    timeout_for,
)
from report import machine, summarise, summary_line
from rest import http_pull_ack, http_push_batch, http_push_single


@dataclass(frozen=True)
class Sizes:
    e2e_total: int = 200_000
    e2e_tasks: int = 4
    single_total: int = 50_000
    single_tasks: int = 100
    latency_count: int = 1_000
    latency_interval_ms: float = 5.0
    backlog_deep: int = 1_000_000
    backlog_shallow: int = 100_000
    backlog_consume: int = 100_000
    fill_tasks: int = 4
    http_clients: int = 50
    http_batch_total: int = 300_000
    http_pull_total: int = 200_000
    http_pullers: int = 6
    http_single_total: int = 30_000


QUICK = Sizes(
    e2e_total=20_000,
    single_total=5_000,
    latency_count=200,
    backlog_deep=50_000,
    backlog_shallow=5_000,
    backlog_consume=5_000,
    http_batch_total=20_000,
    http_pull_total=20_000,
    http_single_total=2_000,
)


DRAIN_CAP_S = 30.0  # a backlog drain slower than 100k in 30 s is measured over 30 s


# ------------------------------------------------------------------------------ scenarios


def queue_setup(work: Path) -> Setup:
    """Producer binding QUEUE and a consumer with batches of 100 that go out at once."""
    return Setup(work / "data", {"QUEUE": "bench"}, (Consumer("bench"),))


def consumed_all(stats: dict[str, Any]) -> bool:
    return stats["done_at"] is not None


async def produce_and_consume(d: Daemon, spec: dict[str, Any]) -> dict[str, Any]:
    """Produce inside the daemon and wait until the consumer has counted everything; rates
    from the daemon's own timestamps."""
    n = spec["total"]
    cpu = CpuWindow(d)
    sent = await d.post("/produce", spec)
    stats = await d.wait_stats(consumed_all, timeout_for(n))
    t0 = stats["produce_started_at"]
    return {
        "e2e_msg_s": n / (stats["done_at"] - t0),
        "send_msg_s": n / (sent["produce_done_at"] - t0),
        "batches": stats["batches"],
        **cpu.usage(),
    }


async def e2e_batch(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    spec = {"mode": "batch", "total": sizes.e2e_total, "tasks": sizes.e2e_tasks}
    with bench.workdir("e2e") as work:
        async with bench.daemon(f"e2e_batch-{run}", work, queue_setup(work)) as d:
            return await produce_and_consume(d, spec)


async def single_send(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    spec = {"mode": "single", "total": sizes.single_total, "tasks": sizes.single_tasks}
    with bench.workdir("single") as work:
        async with bench.daemon(f"single_send-{run}", work, queue_setup(work)) as d:
            return await produce_and_consume(d, spec)


async def latency(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    n = sizes.latency_count
    spec = {"mode": "paced", "total": n, "interval_ms": sizes.latency_interval_ms}
    with bench.workdir("latency") as work:
        async with bench.daemon(f"latency-{run}", work, queue_setup(work)) as d:
            cpu = CpuWindow(d)
            await d.post("/produce", spec)
            stats = await d.wait_stats(consumed_all, timeout_for(n))
            usage = cpu.usage()
            seconds: list[float] = await d.get("/latencies")
    if len(seconds) != n:
        raise BenchError(f"expected {n} latencies, got {len(seconds)}")
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        "batches": stats["batches"],
        **usage,
    }


async def fill_backlog(bench: Bench, name: str, work: Path, sizes: Sizes, n: int) -> dict[str, Any]:
    """A daemon with a producer on ``deep`` and no consumer: store ``n`` messages."""
    setup = Setup(work / "data", {"DEEP": "deep"})
    spec = {"mode": "batch", "total": n, "tasks": sizes.fill_tasks, "binding": "DEEP"}
    async with bench.daemon(f"{name}-fill", work, setup) as d:
        rss_before = d.rss_mb()
        sent = await d.post("/produce", spec)
        rss_after = d.rss_mb()
    return {
        "fill_msg_s": n / (sent["produce_done_at"] - sent["produce_started_at"]),
        "rss_before_fill_mb": rss_before,
        "rss_after_fill_mb": rss_after,
        "db_mb": sum(f.stat().st_size for f in (work / "data").iterdir()) / 2**20,
    }


async def drain_backlog(bench: Bench, name: str, work: Path, consume: int) -> dict[str, Any]:
    """Restart on the same data dir with a consumer on ``deep``; time its first ``consume``
    messages, or as many as it gets through in ``DRAIN_CAP_S`` when it is slow."""
    setup = Setup(work / "data", {"DEEP": "deep"}, (Consumer("deep"),), vars={"TARGET": consume})

    def done(s: dict[str, Any]) -> bool:
        first = s["first_batch_at"]
        return s["done_at"] is not None or (first is not None and s["now"] - first > DRAIN_CAP_S)

    async with bench.daemon(f"{name}-drain", work, setup) as d:
        rss = [d.rss_mb()]
        stats = await d.wait_stats(done, timeout_for(consume), lambda: rss.append(d.rss_mb()))
        startup_s = d.startup_s
    if stats["done_at"] is not None:
        count, end = stats["done_count"], stats["done_at"]
    else:
        count, end = stats["consumed"], stats["now"]
    return {
        "consumed": count,
        "consume_msg_s": (count - stats["first_batch_size"]) / (end - stats["first_batch_at"]),
        "restart_s": startup_s,
        "rss_consuming_max_mb": max(rss),
    }


async def backlog(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, n in (("deep", sizes.backlog_deep), ("shallow", sizes.backlog_shallow)):
        with bench.workdir(f"backlog-{label}") as work:
            name = f"backlog-{label}-{run}"
            filled = await fill_backlog(bench, name, work, sizes, n)
            drained = await drain_backlog(bench, name, work, min(sizes.backlog_consume, n))
        out[label] = {"messages": n, **filled, **drained}
    deep, shallow = out["deep"], out["shallow"]
    out["rate_ratio"] = deep["consume_msg_s"] / shallow["consume_msg_s"]
    out["rss_fill_ratio"] = deep["rss_after_fill_mb"] / shallow["rss_after_fill_mb"]
    out["rss_consume_ratio"] = deep["rss_consuming_max_mb"] / shallow["rss_consuming_max_mb"]
    return out


Scenario = Callable[[Bench, Sizes, int], Awaitable[dict[str, Any]]]
SCENARIOS: dict[str, Scenario] = {
    "e2e_batch": e2e_batch,
    "single_send": single_send,
    "latency": latency,
    "backlog": backlog,
    "http_push_batch": http_push_batch,
    "http_pull_ack": http_pull_ack,
    "http_push_single": http_push_single,
}


# ------------------------------------------------------------------------------ main


async def run_scenarios(
    bench: Bench, sizes: Sizes, runs: int, names: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    results: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    for name in names:
        results[name] = []
        for run in range(1, runs + 1):
            started = time.perf_counter()
            try:
                result = await SCENARIOS[name](bench, sizes, run)
            except BenchError as e:
                errors[name] = str(e)
                print(f"{name} run {run}: FAILED: {e}", file=sys.stderr, flush=True)
                break
            result["wall_s"] = round(time.perf_counter() - started, 2)
            results[name].append(result)
            print(f"{name} run {run}: {json.dumps(result)}", file=sys.stderr, flush=True)
    return results, errors


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--runs", type=int, default=3, help="runs per scenario (default 3)")
    p.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios to run")
    p.add_argument("--profile", action="store_true", help="cProfile each daemon")
    args = p.parse_args(argv)
    unknown = set(args.only.split(",")) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenario(s) {sorted(unknown)}; choose from {list(SCENARIOS)}")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


async def amain(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else Sizes()
    names = args.only.split(",")
    host = machine()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ocd-bench-") as root:
        bench = Bench(Path(root), args.profile)
        results, errors = await run_scenarios(bench, sizes, args.runs, names)
    metrics = summarise(results)
    report = {
        "machine": host,
        "mode": "quick" if args.quick else "full",
        "runs": args.runs,
        "sizes": asdict(sizes),
        "wall_s": round(time.perf_counter() - started, 1),
        "metrics": metrics,
        "results": results,
        "errors": errors,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=2)
    (RESULTS / "latest.json").write_text(text + "\n")
    print(text)
    print(summary_line(metrics))
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # uvloop, as ``ocd serve`` runs: the HTTP load generator then costs less CPU.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
