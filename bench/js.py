"""JavaScript Workers: ocd's JS path (a JS worker in workerd, ocd's durable queues) beside
workerd's own built-in durable queues (``workerd serve wrangler.json --experimental``) and
Miniflare 4 (``wrangler dev``'s in-memory queues), all running the same worker
(``apps/js_bench/index.js``), warmed up the same way, in the same run.

* js_e2e         -- sendBatch(100) from 4 concurrent requests -> consumer batches of 100
                    (timeout 1 s) -> ackAll; messages/s from the first send until the
                    consumer counted them all, with at most 6,000 messages waiting (a
                    window every system gets: Miniflare fails sends beyond about 10,000);
                    ocd's and workerd's CPU per message.
* js_single_send -- one-at-a-time send() from 32 concurrent requests; messages/s of sends.
* js_latency     -- ocd only: one send() every 20 ms, consumer batches of 1 with timeout 0;
                    send -> queue() latency p50/p99 (ms, by the Worker's clock).

Miniflare and workerd limit a request's subrequests, so every system gets the same chunks:
a request sends at most 50 batches or 50 single messages, and the bench keeps 4 (32 for
single sends) such requests in flight. The peers are installed from ``bench/js/
package.json`` (pinned) into ``bench/js/node_modules`` on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from harness import (
    REPO,
    WORKER,
    Bench,
    BenchError,
    free_port,
    percentile,
    process_cpu_s,
    wait_until_up,
)

JS = Path(__file__).resolve().parent / "js"
BIN = JS / "node_modules" / ".bin"
APP = Path(__file__).resolve().parent / "apps" / "js_bench" / "index.js"
DATE = "2026-11-01"
E2E_TOTAL, E2E_QUICK = 50_000, 5_000
SINGLE_TOTAL, SINGLE_QUICK = 5_000, 1_000
CHUNK_BATCHES = 20  # sendBatch calls per request (Miniflare refuses more subrequests)
WINDOW = 6_000  # most messages sent and not yet consumed, for every system alike


class Unavailable(Exception):
    """The JS peers cannot be installed or run here (no npm, no node)."""


def ensure_installed() -> None:
    if (BIN / "workerd").exists() and (BIN / "esbuild").exists() and (BIN / "miniflare").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is missing (apt-get install -y nodejs npm)")
    done = subprocess.run(
        [npm, "--prefix", str(JS), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise Unavailable(f"npm ci in bench/js failed: {done.stderr.strip()[-500:]}")


class Server:
    """One system under test: a process (and its children) answering the bench worker's
    routes on ``url``."""

    def __init__(self, name: str, args: list[str], cwd: Path, env: dict[str, str] | None = None):
        self.name = name
        self.args = args
        self.cwd = cwd
        self.env = dict(os.environ, **(env or {}))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.log = cwd / f"{name}.log"
        self.profiled = False  # ocd with the bench worker profiling it: dump at the end

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Server:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [a.replace("{port}", str(self.port)) for a in self.args],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if not await wait_until_up(self.url + "/health", 120, self.check_alive):
            raise BenchError(f"{self.name} did not answer within 120 s\n{self.tail()}")
        return self

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise BenchError(f"{self.name} exited {self.proc.returncode}\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""

    def cpu_s(self) -> float:
        """CPU of the process and its children still running (workerd under ocd or node)."""
        return sum(self.cpu_parts().values())

    def cpu_parts(self) -> dict[str, float]:
        """CPU of the process (``main``) and of its children still running (``children``:
        workerd under ocd, workerd under node)."""
        assert self.proc is not None
        parts = {"main": 0.0, "children": 0.0}
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            with contextlib.suppress(OSError):
                parts["main" if pid == self.proc.pid else "children"] += process_cpu_s(pid)
        return parts

    async def __aexit__(self, *exc: object) -> None:
        if self.profiled and exc[0] is None:
            async with aiohttp.ClientSession() as s, s.post(f"{self.url}/profile", json={}) as r:
                if r.status != 200:
                    raise BenchError(f"POST /profile: {r.status} {await r.text()}")
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
                    out += _children(int(entry.name))
    return out


def ocd_server(
    work: Path,
    batch: int,
    timeout_s: float,
    dsn: str | None = None,
    profile_env: dict[str, str] | None = None,
) -> Server:
    """ocd running the bench Worker; with ``profile_env`` (``Bench.profile_env``), also the
    Python bench worker on ``/profile``, which profiles the daemon as in the other
    scenarios, and the profile is written when the server stops."""
    store = f'[store]\nbackend = "postgres"\ndsn = {json.dumps(dsn)}\n' if dsn else ""
    profiler = f"""
[[workers]]
name = "profiler"
main = "{WORKER}"
routes = ["/profile"]
"""
    cfg = work / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{{port}}"
data_dir = "{work / "data"}"
durability = "full"
{store}
[js]
workerd = "{BIN / "workerd"}"
esbuild = "{BIN / "esbuild"}"

[[workers]]
name = "bench"
main = "{APP}"
compatibility_date = "{DATE}"
routes = ["/"]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "bench"

[[workers.queues.consumers]]
queue = "bench"
max_batch_size = {batch}
max_batch_timeout = {timeout_s}
{profiler if profile_env else ""}"""
    )
    # the port is only known here: write it into the config before starting
    server = _Templated(
        "ocd",
        [sys.executable, "-m", "ocd", "serve", "-c", str(cfg), "--log-level", "warning"],
        work,
        cfg,
        profile_env or {},
    )
    server.profiled = bool(profile_env)
    return server


class _Templated(Server):
    """A server whose config file names its port."""

    def __init__(
        self, name: str, args: list[str], cwd: Path, cfg: Path, env: dict[str, str]
    ) -> None:
        super().__init__(name, args, cwd, {"PYTHONPATH": str(REPO), **env})
        cfg.write_text(cfg.read_text().replace("{port}", str(self.port)))


def workerd_builtin(work: Path) -> Server:
    shutil.copyfile(APP, work / "index.js")
    (work / "wrangler.json").write_text(
        json.dumps(
            {
                "name": "bench",
                "main": "index.js",
                "compatibility_date": DATE,
                "queues": {
                    "producers": [{"binding": "QUEUE", "queue": "bench"}],
                    "consumers": [
                        {"queue": "bench", "max_batch_size": 100, "max_batch_timeout": 1}
                    ],
                },
            }
        )
    )
    return Server(
        "workerd-builtin",
        [
            str(BIN / "workerd"),
            "serve",
            "wrangler.json",
            "--experimental",
            "-s",
            "http=127.0.0.1:{port}",
        ],
        work,
        {"WORKERD_ESBUILD": str(BIN / "esbuild")},
    )


def miniflare(work: Path) -> Server:
    node = shutil.which("node")
    if node is None:
        raise Unavailable("node is missing")
    return Server("miniflare", [node, str(JS / "miniflare.mjs"), str(APP), "{port}"], work)


async def _get(s: aiohttp.ClientSession, url: str) -> Any:
    async with s.get(url) as r:
        text = await r.text()
        if r.status != 200:
            raise BenchError(f"{url}: {r.status} {text[:300]}")
        return json.loads(text)


async def _produce(
    s: aiohttp.ClientSession, base: str, total: int, single: bool, lanes: int, window: int = 0
) -> float:
    """Send ``total`` messages in chunks from ``lanes`` concurrent requests; seconds taken.
    With ``window``, a chunk goes only while fewer than that many sent messages are
    unconsumed (Miniflare's in-memory broker fails sends beyond about 10,000 waiting)."""
    per = CHUNK_BATCHES if single else CHUNK_BATCHES * 100
    chunks = [min(per, total - i) for i in range(0, total, per)]
    sent = 0
    gate = asyncio.Lock()
    started = time.perf_counter()

    async def lane() -> None:
        nonlocal sent
        while chunks:
            n = chunks.pop()
            async with gate:  # sends in flight count as waiting too
                while window and sent + n - (await _get(s, f"{base}/count"))["consumed"] > window:
                    await asyncio.sleep(0.005)
                sent += n
            q = f"n={n}&lanes=1&batch=100" + ("&single=1" if single else "")
            await _get(s, f"{base}/produce?{q}")

    await asyncio.gather(*(lane() for _ in range(lanes)))
    return time.perf_counter() - started


async def _consumed(s: aiohttp.ClientSession, base: str, total: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        got = (await _get(s, f"{base}/count"))["consumed"]
        if got >= total:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{base}: {got} of {total} consumed within {timeout_s:.0f} s")
        await asyncio.sleep(0.02)


async def _e2e_one(server: Server, total: int) -> dict[str, Any]:
    async with server, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
        base = server.url
        await _produce(s, base, 2_000, False, 4)  # warm-up, the same for every system
        await _consumed(s, base, 2_000, 120)
        await _get(s, f"{base}/reset")
        parts0 = server.cpu_parts()
        started = time.perf_counter()
        send_s = await _produce(s, base, total, False, 4, window=WINDOW)
        await _consumed(s, base, total, 60 + total / 200)
        wall = time.perf_counter() - started
        parts = {k: v - parts0[k] for k, v in server.cpu_parts().items()}
    return {
        "msg_s": round(total / wall),
        "send_msg_s": round(total / send_s),
        "cpu_us_per_msg": round(sum(parts.values()) / total * 1e6, 1),
        # the main process (ocd's daemon, workerd, node) and its children (workerd)
        "cpu_us_per_msg_by_process": {k: round(v / total * 1e6, 1) for k, v in parts.items()},
    }


@contextlib.asynccontextmanager
async def _peers_or_skip() -> AsyncIterator[None]:
    try:
        await asyncio.to_thread(ensure_installed)
    except Unavailable as e:
        from run import Skipped

        raise Skipped(str(e)) from e
    yield


async def js_e2e(bench: Bench, quick: bool, run: int) -> dict[str, Any]:
    total = E2E_QUICK if quick else E2E_TOTAL
    async with _peers_or_skip():
        out: dict[str, Any] = {"messages": total}
        order = ["ocd", "workerd_builtin", "miniflare"]
        order = order[run % 3 :] + order[: run % 3]  # no system always first
        for name in order:
            with bench.workdir(f"js-{name}") as work:
                server = {
                    "ocd": lambda w: ocd_server(
                        w, 100, 1, profile_env=bench.profile_env(f"js_e2e-{run}")
                    ),
                    "workerd_builtin": workerd_builtin,
                    "miniflare": miniflare,
                }[name](work)
                out[name] = await _e2e_one(server, total)
        out["vs_workerd_builtin"] = round(out["ocd"]["msg_s"] / out["workerd_builtin"]["msg_s"], 2)
        out["vs_miniflare"] = round(out["ocd"]["msg_s"] / out["miniflare"]["msg_s"], 2)
        return out


async def js_pg_e2e(
    bench: Bench,
    quick: bool,
    run: int,
    database: Callable[[str], contextlib.AbstractContextManager[str | None]],
) -> dict[str, Any]:
    """``js_e2e``'s load on ocd with its PostgreSQL store against workerd's built-in queues,
    alternating which goes first. ``database(label)`` gives a fresh database's DSN. The
    CPU figures leave out the PostgreSQL server's."""
    total = E2E_QUICK if quick else E2E_TOTAL
    async with _peers_or_skip():
        out: dict[str, Any] = {"messages": total}
        order = ["ocd_postgres", "workerd_builtin"]
        if run % 2 == 0:
            order.reverse()
        for name in order:
            with bench.workdir(f"js-pg-{name}") as work:
                if name == "workerd_builtin":
                    out[name] = await _e2e_one(workerd_builtin(work), total)
                    continue
                with database(f"js_pg_e2e_{run}") as dsn:
                    env = bench.profile_env(f"js_pg_e2e-{run}")
                    out[name] = await _e2e_one(ocd_server(work, 100, 1, dsn, env), total)
        out["vs_workerd_builtin"] = round(
            out["ocd_postgres"]["msg_s"] / out["workerd_builtin"]["msg_s"], 2
        )
        return out


async def js_single_send(bench: Bench, quick: bool, run: int) -> dict[str, Any]:
    total = SINGLE_QUICK if quick else SINGLE_TOTAL
    async with _peers_or_skip():
        out: dict[str, Any] = {"messages": total}
        for name, make in (
            (
                "ocd",
                lambda w: ocd_server(w, 100, 1, None, bench.profile_env(f"js_single_send-{run}")),
            ),
            ("workerd_builtin", workerd_builtin),
        ):
            with bench.workdir(f"js-single-{name}") as work:
                server = make(work)
                async with (
                    server,
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s,
                ):
                    await _produce(s, server.url, 500, True, 32)  # warm-up
                    cpu0 = server.cpu_s()
                    secs = await _produce(s, server.url, total, True, 32)
                    cpu = server.cpu_s() - cpu0
                out[name] = {
                    "send_msg_s": round(total / secs),
                    "cpu_pct": round(100 * cpu / secs),
                    "cpu_us_per_msg": round(cpu / total * 1e6, 1),
                }
        out["vs_workerd_builtin"] = round(
            out["ocd"]["send_msg_s"] / out["workerd_builtin"]["send_msg_s"], 2
        )
        return out


async def js_latency(bench: Bench, quick: bool, run: int) -> dict[str, Any]:
    count = 50 if quick else 300
    async with _peers_or_skip():
        with bench.workdir("js-latency") as work:
            server = ocd_server(work, 1, 0, None, bench.profile_env(f"js_latency-{run}"))
            async with server, aiohttp.ClientSession() as s:
                await _produce(s, server.url, 20, True, 1)
                await _consumed(s, server.url, 20, 60)
                await _get(s, f"{server.url}/reset")
                cpu0 = server.cpu_s()
                for _ in range(count):
                    await _get(s, f"{server.url}/produce?n=1&single=1&lanes=1")
                    await asyncio.sleep(0.02)
                await _consumed(s, server.url, count, 60)
                cpu = server.cpu_s() - cpu0
                lat = (await _get(s, f"{server.url}/count"))["latencies"]
        return {
            "messages": count,
            "p50_ms": percentile(lat, 50),
            "p99_ms": percentile(lat, 99),
            "cpu_us_per_msg": round(cpu / count * 1e6, 1),
        }
