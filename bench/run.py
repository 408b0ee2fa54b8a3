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

The same on the PostgreSQL store (``[store] backend = "postgres"``), on one throw-away
PostgreSQL cluster started for the whole bench (``pgserver.py``: ``tests/pg.py``, fsync and
synchronous_commit on) with a fresh database per run; skipped, with the reason, when no
PostgreSQL can be started:

* pg_e2e_batch, pg_single_send, pg_latency, pg_backlog -- as above;
* pg_two_nodes -- two daemons on one database, each producing half of e2e_batch's messages
                  (from half its tasks) and consuming; messages/s until both together
                  counted them all, against pg_e2e_batch's one node.

FIFO queues (``fifo.py``), on SQLite and PostgreSQL (pg_*), each against its peer in the
same run: fifo_e2e (e2e_batch on 1,000 message groups against a standard queue) and
fifo_hot_group (claims of other groups beside one group of 1,000,000 waiting messages,
against the same claims without it).

The store alone (``store_alone.py``), no daemon: store / pg_store send 100,000 messages in
batches of 100 through the store's interface, then claim and ack them in batches of 100,
on a standard and a FIFO queue (1,000 groups); this process's CPU a message, and on
PostgreSQL the server's and its writes (heap tuples, index entries, dead tuples) a message.

The REST API scenarios (``rest.py``) drive ``/client/v4`` from this process instead
(``load.py``: one aiohttp session, a keep-alive connection per client, bodies serialised
beforehand):

* http_push_batch  -- batch pushes of 100 from 50 clients; messages/s;
* http_pull_ack    -- a few pullers pull 100 and ack them in one request, from a pre-filled
                      queue with a pull consumer; messages/s;
* sqs_boto3        -- the SQS endpoint under boto3 (``sqs.py``): 8 threads of
                      SendMessageBatch(10), then ReceiveMessage(10) + DeleteMessageBatch, on
                      backlogs of 1k, 10k and 100k, and moto's server beside it (1,600
                      messages; skipped without moto, a dev dependency);
* sqs_raw          -- the SQS endpoint from the lean raw-socket generator (``sqs_lean.py``):
                      pre-built SendMessageBatch(10) requests from 50 connections, then
                      ReceiveMessage(10) + DeleteMessageBatch from 32; messages/s of each;
* sqs_idle_polls   -- 50 open ReceiveMessage(WaitTimeSeconds=20) on an empty queue: the
                      daemon's CPU over 25 s, then single sends' wake-up latency;
* idle_queues      -- 10,000 queues with a consumer each and no traffic (``idle.py``): start
                      and restart until ready, and the daemon's idle CPU, beside 10 queues;
                      pg_idle_queues the same on PostgreSQL;
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
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import js
import uvloop
from fifo import fifo_e2e_run, fifo_hot_group_run
from harness import (
    POLL_S,
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
from idle import idle_queues_run
from pgserver import PgServer
from report import machine, summarise, summary_line
from rest import http_pull_ack, http_push_batch, http_push_single
from sqs import sqs_boto3_run
from sqs_lean import sqs_idle_polls, sqs_raw
from store_alone import store_run
from ui import ui


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
    fifo_others: int = 100_000  # messages of other groups claimed beside the hot one
    sqs_total: int = 20_000  # per backlog, sent then received over SQS by boto3
    sqs_backlogs: tuple[int, ...] = (1_000, 10_000, 100_000)
    sqs_moto_total: int = 1_600
    sqs_raw_total: int = 200_000  # sent, then received and deleted, by the lean generator
    sqs_raw_senders: int = 50
    sqs_raw_receivers: int = 32
    sqs_idle_polls: int = 50
    sqs_idle_window_s: float = 25.0  # longer than a poll's 20 s wait
    sqs_wakeups: int = 200
    store_messages: int = 100_000  # the store alone: sent, then claimed and acked


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
    fifo_others=10_000,
    sqs_total=2_000,
    sqs_backlogs=(1_000, 10_000),
    sqs_raw_total=10_000,
    sqs_idle_window_s=2.0,
    sqs_wakeups=20,
    store_messages=10_000,
)


DRAIN_CAP_S = 30.0  # a backlog drain slower than 100k in 30 s is measured over 30 s


# ------------------------------------------------------------------------------ scenarios


class Skipped(Exception):
    """A scenario cannot run on this machine (no PostgreSQL); not a failure of the bench."""


def queue_setup(work: Path, dsn: str | None = None) -> Setup:
    """Producer binding QUEUE and a consumer with batches of 100 that go out at once."""
    return Setup(work / "data", {"QUEUE": "bench"}, (Consumer("bench"),), dsn=dsn)


def consumed_all(stats: dict[str, Any]) -> bool:
    return stats["done_at"] is not None


class Group:
    """Several daemons as one measured server (their CPU summed)."""

    def __init__(self, daemons: list[Daemon]) -> None:
        self.daemons = daemons

    def cpu_s(self) -> float:
        return sum(d.cpu_s() for d in self.daemons)


class Usage:
    """A ``CpuWindow`` over the daemon(s), and with PostgreSQL also the server's CPU
    (``pg_cpu_pct``), which is then no longer counted in ``other_cpu_pct``."""

    def __init__(self, daemons: list[Daemon], pg: PgServer | None = None) -> None:
        self.pg = pg
        self.pg_s = pg.cpu_s() if pg is not None else 0.0
        self.wall = time.perf_counter()
        self.window = CpuWindow(daemons[0] if len(daemons) == 1 else Group(daemons))

    def usage(self) -> dict[str, float]:
        out = self.window.usage()
        if self.pg is not None:
            pct = 100 * (self.pg.cpu_s() - self.pg_s) / (time.perf_counter() - self.wall)
            out["pg_cpu_pct"] = round(pct, 1)
            out["other_cpu_pct"] = round(max(0.0, out["other_cpu_pct"] - pct), 1)
        return out


def pg_of(bench: Bench) -> PgServer:
    """The bench's PostgreSQL, started on first use; Skipped when there is none."""
    pg: PgServer | None = bench.pg
    if pg is None:
        raise Skipped("no PostgreSQL server for this bench")
    reason = pg.start()
    if reason is not None:
        raise Skipped(reason)
    return pg


@contextlib.contextmanager
def store(bench: Bench, label: str, postgres: bool) -> Iterator[str | None]:
    """The DSN of a fresh database for one run (None: the SQLite store)."""
    if not postgres:
        yield None
        return
    with pg_of(bench).database(label) as dsn:
        yield dsn


async def produce_and_consume(
    d: Daemon, spec: dict[str, Any], pg: PgServer | None = None
) -> dict[str, Any]:
    """Produce inside the daemon and wait until the consumer has counted everything; rates
    from the daemon's own timestamps."""
    n = spec["total"]
    cpu = Usage([d], pg)
    sent = await d.post("/produce", spec)
    stats = await d.wait_stats(consumed_all, timeout_for(n))
    t0 = stats["produce_started_at"]
    return {
        "e2e_msg_s": n / (stats["done_at"] - t0),
        "send_msg_s": n / (sent["produce_done_at"] - t0),
        "batches": stats["batches"],
        **cpu.usage(),
    }


async def run_e2e(
    bench: Bench, name: str, run: int, spec: dict[str, Any], postgres: bool = False
) -> dict[str, Any]:
    with bench.workdir(name) as work, store(bench, name, postgres) as dsn:
        async with bench.daemon(f"{name}-{run}", work, queue_setup(work, dsn)) as d:
            return await produce_and_consume(d, spec, bench.pg if postgres else None)


def e2e_spec(sizes: Sizes) -> dict[str, Any]:
    return {"mode": "batch", "total": sizes.e2e_total, "tasks": sizes.e2e_tasks}


def single_spec(sizes: Sizes) -> dict[str, Any]:
    return {"mode": "single", "total": sizes.single_total, "tasks": sizes.single_tasks}


async def e2e_batch(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_e2e(bench, "e2e_batch", run, e2e_spec(sizes))


async def single_send(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_e2e(bench, "single_send", run, single_spec(sizes))


async def pg_e2e_batch(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_e2e(bench, "pg_e2e_batch", run, e2e_spec(sizes), postgres=True)


async def pg_single_send(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_e2e(bench, "pg_single_send", run, single_spec(sizes), postgres=True)


async def run_latency(
    bench: Bench, sizes: Sizes, name: str, run: int, postgres: bool
) -> dict[str, Any]:
    n = sizes.latency_count
    spec = {"mode": "paced", "total": n, "interval_ms": sizes.latency_interval_ms}
    with bench.workdir(name) as work, store(bench, name, postgres) as dsn:
        async with bench.daemon(f"{name}-{run}", work, queue_setup(work, dsn)) as d:
            cpu = Usage([d], bench.pg if postgres else None)
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


async def latency(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_latency(bench, sizes, "latency", run, postgres=False)


async def pg_latency(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_latency(bench, sizes, "pg_latency", run, postgres=True)


async def fill_backlog(
    bench: Bench, name: str, work: Path, sizes: Sizes, n: int, dsn: str | None
) -> dict[str, Any]:
    """A daemon with a producer on ``deep`` and no consumer: store ``n`` messages."""
    setup = Setup(work / "data", {"DEEP": "deep"}, dsn=dsn)
    spec = {"mode": "batch", "total": n, "tasks": sizes.fill_tasks, "binding": "DEEP"}
    async with bench.daemon(f"{name}-fill", work, setup) as d:
        rss_before = d.rss_mb()
        sent = await d.post("/produce", spec)
        rss_after = d.rss_mb()
    if dsn is None:
        db_mb = sum(f.stat().st_size for f in (work / "data").iterdir()) / 2**20
    else:
        db_mb = pg_of(bench).db_size_mb(dsn)
    return {
        "fill_msg_s": n / (sent["produce_done_at"] - sent["produce_started_at"]),
        "rss_before_fill_mb": rss_before,
        "rss_after_fill_mb": rss_after,
        "db_mb": db_mb,
    }


async def drain_backlog(
    bench: Bench, name: str, work: Path, consume: int, dsn: str | None
) -> dict[str, Any]:
    """Restart on the same data dir (database) with a consumer on ``deep``; time its first
    ``consume`` messages, or as many as it gets through in ``DRAIN_CAP_S`` when it is slow."""
    setup = Setup(
        work / "data", {"DEEP": "deep"}, (Consumer("deep"),), vars={"TARGET": consume}, dsn=dsn
    )

    def done(s: dict[str, Any]) -> bool:
        first = s["first_batch_at"]
        return s["done_at"] is not None or (first is not None and s["now"] - first > DRAIN_CAP_S)

    async with bench.daemon(f"{name}-drain", work, setup) as d:
        rss = [d.rss_mb()]
        cpu = Usage([d], bench.pg if dsn is not None else None)
        stats = await d.wait_stats(done, timeout_for(consume), lambda: rss.append(d.rss_mb()))
        usage = cpu.usage()
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
        **{f"drain_{k}": v for k, v in usage.items()},
    }


async def run_backlog(
    bench: Bench, sizes: Sizes, name: str, run: int, postgres: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, n in (("deep", sizes.backlog_deep), ("shallow", sizes.backlog_shallow)):
        db = store(bench, f"{name}_{label}", postgres)
        with bench.workdir(f"{name}-{label}") as work, db as dsn:
            run_name = f"{name}-{label}-{run}"
            filled = await fill_backlog(bench, run_name, work, sizes, n, dsn)
            consume = min(sizes.backlog_consume, n)
            drained = await drain_backlog(bench, run_name, work, consume, dsn)
        out[label] = {"messages": n, **filled, **drained}
    deep, shallow = out["deep"], out["shallow"]
    out["rate_ratio"] = deep["consume_msg_s"] / shallow["consume_msg_s"]
    out["rss_fill_ratio"] = deep["rss_after_fill_mb"] / shallow["rss_after_fill_mb"]
    out["rss_consume_ratio"] = deep["rss_consuming_max_mb"] / shallow["rss_consuming_max_mb"]
    return out


async def backlog(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_backlog(bench, sizes, "backlog", run, postgres=False)


async def pg_backlog(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await run_backlog(bench, sizes, "pg_backlog", run, postgres=True)


async def wait_all(
    daemons: list[Daemon], done: Callable[[list[dict[str, Any]]], bool], timeout_s: float
) -> list[dict[str, Any]]:
    """Poll every daemon's ``/stats`` every ``POLL_S`` until ``done`` of all of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        for d in daemons:
            d.check_alive()
        stats: list[dict[str, Any]] = [await d.get("/stats") for d in daemons]
        if done(stats):
            return stats
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout_s} s; last stats {stats}")
        await asyncio.sleep(POLL_S)


async def pg_two_nodes(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    """Two daemons on one database, each with the producer and the consumer: each produces
    half of e2e_batch's messages from half its tasks (so four in all, as on one node); the
    rate is until the two consumers together have counted them all. Each counts only what
    it consumed; both timestamp with the machine's monotonic clock."""
    pg = pg_of(bench)
    n = sizes.e2e_total
    halves = (n // 2, n - n // 2)
    tasks = max(1, sizes.e2e_tasks // 2)
    with bench.workdir("pg_two_nodes") as work, pg.database("pg_two_nodes") as dsn:
        setups = [queue_setup(work / node, dsn) for node in ("a", "b")]
        async with (
            bench.daemon(f"pg_two_nodes-{run}-a", work, setups[0]) as a,
            bench.daemon(f"pg_two_nodes-{run}-b", work, setups[1]) as b,
        ):
            cpu = Usage([a, b], pg)
            specs = [{"mode": "batch", "total": half, "tasks": tasks} for half in halves]
            sent = await asyncio.gather(a.post("/produce", specs[0]), b.post("/produce", specs[1]))
            stats = await wait_all(
                [a, b], lambda ss: sum(s["consumed"] for s in ss) >= n, timeout_for(n)
            )
            usage = cpu.usage()
    t0 = min(s["produce_started_at"] for s in sent)
    end = max(s["last_batch_at"] for s in stats if s["last_batch_at"] is not None)
    consumed = [s["consumed"] for s in stats]
    return {
        "e2e_msg_s": n / (end - t0),
        "send_msg_s": n / (max(s["produce_done_at"] for s in sent) - t0),
        "consumed_per_node": consumed,
        "duplicates": sum(consumed) - n,
        "batches": sum(s["batches"] for s in stats),
        **usage,
    }


Scenario = Callable[[Bench, Sizes, int], Awaitable[dict[str, Any]]]


async def fifo_e2e(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await fifo_e2e_run(bench, "fifo_e2e", run, sizes, False, store, produce_and_consume)


async def pg_fifo_e2e(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await fifo_e2e_run(bench, "pg_fifo_e2e", run, sizes, True, store, produce_and_consume)


async def fifo_hot_group(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await fifo_hot_group_run(bench, "fifo_hot_group", run, sizes, False, store)


async def pg_fifo_hot_group(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await fifo_hot_group_run(bench, "pg_fifo_hot_group", run, sizes, True, store)


async def sqs_boto3(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await sqs_boto3_run(
        bench, run, sizes.sqs_total, sizes.sqs_backlogs, sizes.sqs_moto_total
    )


async def store_alone(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await store_run(bench, "store", run, sizes.store_messages, None)


async def pg_store_alone(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await store_run(bench, "pg_store", run, sizes.store_messages, pg_of(bench))


async def idle_queues(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await idle_queues_run(
        bench, "idle_queues", run, sizes is QUICK, lambda label: store(bench, label, False)
    )


async def pg_idle_queues(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    pg_of(bench)  # Skipped without a PostgreSQL server
    return await idle_queues_run(
        bench, "pg_idle_queues", run, sizes is QUICK, lambda label: store(bench, label, True)
    )


async def js_e2e(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await js.js_e2e(bench, sizes is QUICK, run)


async def js_pg_e2e(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    pg_of(bench)  # Skipped without a PostgreSQL server
    return await js.js_pg_e2e(
        bench, sizes is QUICK, run, lambda label: store(bench, label, postgres=True)
    )


async def js_single_send(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await js.js_single_send(bench, sizes is QUICK, run)


async def js_latency(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    return await js.js_latency(bench, sizes is QUICK, run)


SCENARIOS: dict[str, Scenario] = {
    "e2e_batch": e2e_batch,
    "single_send": single_send,
    "latency": latency,
    "backlog": backlog,
    "http_push_batch": http_push_batch,
    "http_pull_ack": http_pull_ack,
    "http_push_single": http_push_single,
    "pg_e2e_batch": pg_e2e_batch,
    "pg_single_send": pg_single_send,
    "pg_latency": pg_latency,
    "pg_backlog": pg_backlog,
    "pg_two_nodes": pg_two_nodes,
    "fifo_e2e": fifo_e2e,
    "fifo_hot_group": fifo_hot_group,
    "pg_fifo_e2e": pg_fifo_e2e,
    "pg_fifo_hot_group": pg_fifo_hot_group,
    "store": store_alone,
    "pg_store": pg_store_alone,
    "ui": ui,
    "sqs_boto3": sqs_boto3,
    "sqs_raw": sqs_raw,
    "sqs_idle_polls": sqs_idle_polls,
    "js_e2e": js_e2e,
    "js_pg_e2e": js_pg_e2e,
    "js_single_send": js_single_send,
    "js_latency": js_latency,
    "idle_queues": idle_queues,
    "pg_idle_queues": pg_idle_queues,
}


# ------------------------------------------------------------------------------ main


async def run_scenarios(
    bench: Bench, sizes: Sizes, runs: int, names: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str], dict[str, str]]:
    results: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in names:
        results[name] = []
        for run in range(1, runs + 1):
            started = time.perf_counter()
            try:
                result = await SCENARIOS[name](bench, sizes, run)
            except Skipped as e:
                skipped[name] = str(e)
                print(f"{name}: SKIPPED: {e}", file=sys.stderr, flush=True)
                break
            except BenchError as e:
                errors[name] = str(e)
                print(f"{name} run {run}: FAILED: {e}", file=sys.stderr, flush=True)
                break
            result["wall_s"] = round(time.perf_counter() - started, 2)
            results[name].append(result)
            print(f"{name} run {run}: {json.dumps(result)}", file=sys.stderr, flush=True)
        if not results[name]:
            del results[name]
    return results, errors, skipped


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
    pg = PgServer()
    try:
        with tempfile.TemporaryDirectory(prefix="ocd-bench-") as root:
            bench = Bench(Path(root), args.profile, pg)
            results, errors, skipped = await run_scenarios(bench, sizes, args.runs, names)
        if pg.cluster is not None:
            host["postgres"] = {"version": pg.version, **pg.settings()}
    finally:
        pg.close()
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
        "skipped": skipped,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=2)
    (RESULTS / "latest.json").write_text(text + "\n")
    print(text)
    print(summary_line(metrics, skipped))
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # uvloop, as ``ocd serve`` runs: the HTTP load generator then costs less CPU.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
