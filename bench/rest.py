"""The REST API scenarios: ``/client/v4`` driven from the bench process by ``load.py``.

* http_push_batch  -- batch pushes of 100 from 50 clients; messages/s;
* http_pull_ack    -- a few pullers pull 100 and ack them in one request, from a queue the
                      bench worker filled, with a pull consumer added over the API;
* http_push_single -- single pushes from 50 clients, requests/s, and in the same run the
                      same requests against ``apps/trivial_server.py``, in blocks that
                      alternate with ocd's: ocd's rate over the trivial one; from the
                      aiohttp client, then from the lean ``load.RawLoad``.

With no ``[[accounts]]`` in the config the account is ``local`` and needs no token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import load
from harness import Bench, BenchError, CpuWindow, Daemon, Measured, Setup, timeout_for
from load import TrivialServer

if TYPE_CHECKING:
    from run import Sizes

API = "/client/v4/accounts/local/queues"
HTTP_BATCH = 100  # messages per batch push, and per pull
SINGLE_BLOCKS = 5  # ocd's single pushes are measured in this many blocks, each between two
# of the trivial server's
PULL_VISIBILITY_MS = 600_000  # no lease runs out during a run, so nothing is pulled twice


async def create_queue(d: Daemon, name: str) -> str:
    """Create queue ``name`` over the API; the path of its messages."""
    await d.post(API, {"queue_name": name})
    return f"{API}/{name}/messages"


async def add_pull_consumer(d: Daemon, name: str) -> str:
    """Give queue ``name`` an HTTP pull consumer over the API; the path of its messages."""
    await d.post(f"{API}/{name}/consumers", {"type": "http_pull"})
    return f"{API}/{name}/messages"


async def measure(
    server: Measured,
    url: str,
    path: str,
    bodies: list[bytes],
    clients: int,
    per_request: int = 1,
) -> dict[str, Any]:
    """Open a connection per client, then POST every body; rates and the CPU it took."""
    async with load.session(url, clients) as s:
        await load.warm_up(s, path, bodies[0], clients)
        return combined([await timed(server, s, path, bodies, clients, per_request)])


async def http_push_batch(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    n = sizes.http_batch_total
    bodies = [
        load.dumps({"messages": [{"body": {"i": i}} for i in range(start, start + HTTP_BATCH)]})
        for start in range(0, n, HTTP_BATCH)
    ]
    with bench.workdir("http-batch") as work:
        async with bench.daemon(f"http_push_batch-{run}", work, Setup(work / "data", {})) as d:
            path = await create_queue(d, "http")
            return await measure(d, d.url, f"{path}/batch", bodies, sizes.http_clients, HTTP_BATCH)


async def http_pull_ack(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    n = sizes.http_pull_total
    # Filled by the bench worker inside the daemon: fast, and not part of the measurement.
    spec = {"mode": "batch", "total": n, "tasks": sizes.fill_tasks, "binding": "PULLED"}
    with bench.workdir("http-pull") as work:
        setup = Setup(work / "data", {"PULLED": "pulled"})
        async with bench.daemon(f"http_pull_ack-{run}", work, setup) as d:
            path = await add_pull_consumer(d, "pulled")
            await d.post("/produce", spec)
            async with load.session(d.url, sizes.http_pullers) as s:
                cpu = CpuWindow(d)
                done = await asyncio.wait_for(
                    load.pull_and_ack(s, path, sizes.http_pullers, HTTP_BATCH, PULL_VISIBILITY_MS),
                    timeout_for(n),
                )
                usage = cpu.usage()
    if done.messages != n:
        raise BenchError(f"pulled and acked {done.messages} messages, expected {n}")
    return {**done.summary(), **usage}


async def http_push_single(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    """The same single pushes against ocd and against a trivial aiohttp handler, in
    alternating blocks: trivial, ocd, trivial, ..., ocd, trivial (``SINGLE_BLOCKS`` of ocd);
    first from the aiohttp client, then again from the lean ``RawLoad`` generator.

    The machine's speed drifts over seconds: one trivial measurement taken before ocd's
    and one after moved the ratio by ±0.15 between runs. Short alternating blocks put both
    servers through the same drift, and each rate is requests over seconds of all its
    blocks. The aiohttp client costs about as much CPU per request as the trivial server
    and limits it; the lean generator lets the trivial server run at its own pace, the
    harder comparison for ocd."""
    clients = sizes.http_clients
    per_block = max(clients, sizes.http_single_total // SINGLE_BLOCKS)
    bodies = [load.dumps({"body": {"i": i}}) for i in range(per_block * (SINGLE_BLOCKS + 1))]
    blocks = [bodies[i : i + per_block] for i in range(0, len(bodies), per_block)]
    with bench.workdir("http-single") as work:
        setup = Setup(work / "data", {})
        async with (
            bench.daemon(f"http_push_single-{run}", work, setup) as d,
            TrivialServer(work / "trivial.log") as t,
        ):
            path = await create_queue(d, "http")
            c0 = await d.commits()
            async with load.session(d.url, clients) as to_ocd, load.session(t.url, clients) as to_t:
                await load.warm_up(to_ocd, path, bodies[0], clients)
                await load.warm_up(to_t, path, bodies[0], clients)

                def client(server: Measured, s: aiohttp.ClientSession) -> Go:
                    return lambda block: timed(server, s, path, block, clients)

                out = await alternate(d, client(d, to_ocd), client(t, to_t), blocks)
            c1 = await d.commits()
            async with (
                load.RawLoad(d.port, clients) as raw_ocd,
                load.RawLoad(t.port, clients) as raw_t,
            ):

                def raw(server: Measured, gen: load.RawLoad) -> Go:
                    return lambda block: raw_timed(
                        server, gen, [gen.request(path, b) for b in block]
                    )

                await raw_ocd.drive([raw_ocd.request(path, bodies[0])] * clients)
                await raw_t.drive([raw_t.request(path, bodies[0])] * clients)
                out["raw"] = await alternate(d, raw(d, raw_ocd), raw(t, raw_t), blocks)
    # How the pushes from the aiohttp client were committed: groups that went to the
    # writer's thread (the slow-disk fallback) cost a thread hand-over each, and bigger
    # groups share an fsync.
    on_loop, on_thread = c1["loop"] - c0["loop"], c1["writer"] - c0["writer"]
    ocd = out["ocd"]
    ocd["commits_on_loop"], ocd["commits_on_writer_thread"] = on_loop, on_thread
    ocd["ops_per_commit"] = round(
        (c1["operations"] - c0["operations"]) / max(1, on_loop + on_thread), 1
    )
    return out


Go = Callable[[list[bytes]], Awaitable[tuple[load.Load, dict[str, float]]]]


async def alternate(d: Daemon, ocd: Go, trivial: Go, blocks: list[list[bytes]]) -> dict[str, Any]:
    """Blocks to the trivial server and to ocd in turn, starting and ending with the trivial
    server's; ocd's rate over the trivial server's."""
    ocd_parts, trivial_parts, ocd_idle = [], [], []
    for i, block in enumerate(blocks):
        idle = CpuWindow(d)
        trivial_parts.append(await trivial(block))
        ocd_idle.append(idle.usage()["daemon_cpu_pct"])
        if i < len(blocks) - 1:
            ocd_parts.append(await ocd(block))
    o = combined(ocd_parts)
    t = combined(trivial_parts)
    t["server_cpu_pct"] = t.pop("daemon_cpu_pct")  # that server is no daemon
    # ocd idles beside the trivial server's blocks; its timers (checkpoints) must not eat
    # into the yardstick.
    t["ocd_cpu_pct"] = round(sum(ocd_idle) / len(ocd_idle), 1)
    return {
        "req_s": o["req_s"],
        "trivial_req_s": t["req_s"],
        "ratio": o["req_s"] / t["req_s"],
        # Each ocd block against the trivial blocks either side of it: how much the ratio
        # moves within one run.
        "block_ratios": [
            round(rate(a) / ((rate(b) + rate(c)) / 2), 3)
            for a, b, c in zip(ocd_parts, trivial_parts, trivial_parts[1:], strict=False)
        ],
        "ocd": o,
        "trivial": t,
    }


async def timed(
    server: Measured,
    s: aiohttp.ClientSession,
    path: str,
    bodies: list[bytes],
    clients: int,
    per_request: int = 1,
) -> tuple[load.Load, dict[str, float]]:
    """POST every body once over open connections; what it did, and the CPU it took."""
    cpu = CpuWindow(server)
    done = await asyncio.wait_for(
        load.drive(s, path, bodies, clients, per_request),
        timeout_for(len(bodies) * per_request),
    )
    return done, cpu.usage()


async def raw_timed(
    server: Measured, gen: load.RawLoad, requests: list[bytes]
) -> tuple[load.Load, dict[str, float]]:
    cpu = CpuWindow(server)
    done = await asyncio.wait_for(gen.drive(requests), timeout_for(len(requests)))
    return done, cpu.usage()


def rate(part: tuple[load.Load, dict[str, float]]) -> float:
    return part[0].requests / part[0].seconds


def combined(parts: list[tuple[load.Load, dict[str, float]]]) -> dict[str, Any]:
    """Several blocks as one measurement: rates over their total time, CPU weighted by it."""
    whole = load.Load(
        sum(p.requests for p, _ in parts),
        sum(p.messages for p, _ in parts),
        sum(p.seconds for p, _ in parts),
        [s for p, _ in parts for s in p.latencies_s],
    )
    result: dict[str, Any] = whole.summary()
    for key in ("daemon_cpu_pct", "bench_cpu_pct", "other_cpu_pct"):
        result[key] = round(sum(u[key] * p.seconds for p, u in parts) / whole.seconds, 1)
    # The server's CPU per request: steadier than the rate when the machine is noisy.
    result["cpu_us_per_req"] = round(result["daemon_cpu_pct"] * 1e4 / result["req_s"], 1)
    return result
