"""The REST API scenarios: ``/client/v4`` driven from the bench process by ``load.py``.

* http_push_batch  -- batch pushes of 100 from 50 clients; messages/s;
* http_pull_ack    -- a few pullers pull 100 and ack them in one request, from a queue the
                      bench worker filled, with a pull consumer added over the API;
* http_push_single -- single pushes from 50 clients, requests/s, and in the same run the
                      same requests against ``apps/trivial_server.py`` just before and just
                      after: ocd's rate over the mean of those two.

With no ``[[accounts]]`` in the config the account is ``local`` and needs no token.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import load
from harness import Bench, BenchError, CpuWindow, Daemon, Measured, Setup, timeout_for
from load import TrivialServer

if TYPE_CHECKING:
    from run import Sizes

API = "/client/v4/accounts/local/queues"
HTTP_BATCH = 100  # messages per batch push, and per pull
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
        cpu = CpuWindow(server)
        done = await asyncio.wait_for(
            load.drive(s, path, bodies, clients, per_request),
            timeout_for(len(bodies) * per_request),
        )
        usage = cpu.usage()
    result = {**done.summary(), **usage}
    # The server's CPU per request: steadier than the rate when the machine is noisy.
    result["cpu_us_per_req"] = round(usage["daemon_cpu_pct"] * 1e4 / result["req_s"], 1)
    return result


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
    """The same single pushes against ocd and against a trivial aiohttp handler.

    The trivial server is measured just before and just after ocd, and ocd is compared with
    the mean of the two: the machine's speed drifts over seconds, and one trivial run taken
    before or after alone moved the ratio by ±0.15 between runs."""
    bodies = [load.dumps({"body": {"i": i}}) for i in range(sizes.http_single_total)]
    clients = sizes.http_clients
    with bench.workdir("http-single") as work:
        setup = Setup(work / "data", {})
        async with (
            bench.daemon(f"http_push_single-{run}", work, setup) as d,
            TrivialServer(work / "trivial.log") as t,
        ):
            path = await create_queue(d, "http")
            before = await measure(t, t.url, path, bodies, clients)
            c0 = await d.commits()
            ocd = await measure(d, d.url, path, bodies, clients)
            c1 = await d.commits()
            after = await measure(t, t.url, path, bodies, clients)
    # How the pushes were committed: groups that went to the writer's thread (the slow-disk
    # fallback) cost a thread hand-over each, and bigger groups share an fsync.
    on_loop, on_thread = c1["loop"] - c0["loop"], c1["writer"] - c0["writer"]
    ocd["commits_on_loop"], ocd["commits_on_writer_thread"] = on_loop, on_thread
    ocd["ops_per_commit"] = round(
        (c1["operations"] - c0["operations"]) / max(1, on_loop + on_thread), 1
    )
    trivial = {
        key: round((before[key] + after[key]) / 2, 1)
        for key in ("req_s", "daemon_cpu_pct", "bench_cpu_pct", "other_cpu_pct", "cpu_us_per_req")
    }
    trivial["server_cpu_pct"] = trivial.pop("daemon_cpu_pct")  # that server is no daemon
    trivial["req_s_before"], trivial["req_s_after"] = before["req_s"], after["req_s"]
    return {
        "req_s": ocd["req_s"],
        "trivial_req_s": trivial["req_s"],
        "ratio": ocd["req_s"] / trivial["req_s"],
        "ocd": ocd,
        "trivial": trivial,
    }
