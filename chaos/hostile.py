"""Hostile connections: a real ``ocd serve`` held to a small descriptor limit, under a
steady trickle of REST pushes, is flooded with more half-open and slow-header connections
than it has descriptors, then sent gzip bombs (1 MB that inflates to 1 GiB), with and
without a token.

Reports whether the trickle kept being served (``send_errors``; ``lost`` = acknowledged
pushes missing from the queue afterwards), how long the hostile connections stayed open
(``half_open_closed_s``: from the last one opened until the daemon had closed them all),
how fast each bomb was refused, and the stall: the slowest ``/__ocd/healthz`` (a fresh
connection each) while bombs were arriving, next to the slowest before any fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
TOKEN = "chaos-hostile"
QUEUE = "hostile"
HEADER_TIMEOUT_S = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(work: Path, port: int) -> Path:
    cfg = work / "ocd.toml"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5
header_timeout = {HEADER_TIMEOUT_S}
body_timeout = 10

[[accounts]]
id = "local"
token_sha256 = ["{digest}"]

[[queues]]
name = "{QUEUE}"
"""
    )
    return cfg


class Ocd:
    """``ocd serve`` with RLIMIT_NOFILE lowered to ``nofile`` (soft and hard)."""

    def __init__(self, cfg: Path, nofile: int) -> None:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ocd", "serve", "-c", str(cfg), "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            preexec_fn=limit,
        )
        self.events: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def count(self, event: str) -> int:
        return sum(1 for e in self.events if e.get("event") == event)

    def first(self, event: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == event), None)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def _bomb() -> bytes:
    member = gzip.compress(bytes(1 << 20), compresslevel=9)  # about 1 KB
    return member * 1024  # about 1 MB, 1 GiB inflated


class Trickle:
    """Pushes one message at a time, each on a fresh connection, as a normal client."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/client/v4/accounts/local/queues/{QUEUE}/messages"
        self.acked = 0
        self.errors: list[str] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        connector = aiohttp.TCPConnector(force_close=True)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:
            n = 0
            while not self.stop.is_set():
                try:
                    async with s.post(self.url, json={"body": {"n": n}}, headers=headers) as r:
                        if r.status == 200:
                            self.acked += 1
                        else:
                            self.errors.append(f"{r.status} {await r.text()}"[:200])
                except (aiohttp.ClientError, TimeoutError) as e:
                    self.errors.append(f"{type(e).__name__}: {e}"[:200])
                n += 1
                await asyncio.sleep(0.02)


class Probe:
    """``/__ocd/healthz`` latencies, a fresh connection each, in named phases."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/__ocd/healthz"
        self.phase = "baseline"
        self.latencies: dict[str, list[float]] = {}
        self.failures = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as s:
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    async with s.get(self.url) as r:
                        await r.read()
                        ok = r.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    ok = False
                if ok:
                    took = (time.perf_counter() - started) * 1000
                    self.latencies.setdefault(self.phase, []).append(took)
                else:
                    self.failures += 1
                await asyncio.sleep(0.01)

    def worst_ms(self, phase: str) -> float | None:
        values = self.latencies.get(phase)
        return round(max(values), 1) if values else None

    def median_ms(self, phase: str) -> float | None:
        values = self.latencies.get(phase)
        return round(statistics.median(values), 1) if values else None


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _flood(port: int, n: int) -> list[Conn]:
    conns = []
    for i in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        if i % 2:  # the start of a request head, never finished (slowloris)
            writer.write(b"POST /client/v4/accounts/local/queues HTTP/1.1\r\nHost: x\r\nX-A: ")
        conns.append((reader, writer))
    return conns


async def _closed(reader: asyncio.StreamReader) -> float:
    """When the daemon closed the connection (monotonic), or +inf if it did not in 60 s."""
    try:
        async with asyncio.timeout(60):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return float("inf")
    except ConnectionError:
        pass
    return time.monotonic()


async def _send_bomb(port: int, bomb: bytes, token: bool) -> tuple[int, float]:
    """(status, seconds to the answer) for one bomb, streamed in 64 KiB pieces."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    auth = f"Authorization: Bearer {TOKEN}\r\n" if token else ""
    head = (
        f"POST /client/v4/accounts/local/queues/{QUEUE}/messages HTTP/1.1\r\nHost: x\r\n"
        f"{auth}Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(bomb)}\r\n\r\n"
    ).encode()
    started = time.monotonic()

    async def stream() -> None:
        writer.write(head)
        for i in range(0, len(bomb), 65536):
            writer.write(bomb[i : i + 65536])
            await writer.drain()

    sender = asyncio.create_task(stream())
    try:
        async with asyncio.timeout(60):
            line = await reader.readline()
        took = time.monotonic() - started
        status = int(line.split()[1]) if line else 0
    finally:
        sender.cancel()
        with contextlib.suppress(BaseException):
            await sender
        writer.close()
    return status, took


async def _backlog(base: str) -> int:
    url = f"{base}/client/v4/accounts/local/queues/{QUEUE}/metrics"
    async with aiohttp.ClientSession() as s:
        async with s.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            out = await r.json()
    return int(out["result"]["backlog_count"])


async def _healthy(base: str, ocd: Ocd, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            if ocd.proc.poll() is not None:
                raise RuntimeError("ocd exited:\n" + "\n".join(ocd.lines[-20:]))
            with contextlib.suppress(aiohttp.ClientError):
                async with s.get(f"{base}/__ocd/healthz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise RuntimeError("ocd did not become healthy:\n" + "\n".join(ocd.lines[-20:]))


async def run(quick: bool) -> dict[str, Any]:
    nofile = 256 if quick else 1024
    flood_n = 300 if quick else 1100
    waves = 1 if quick else 3
    bombers = 2 if quick else 4  # half with a token (413), half without (403)
    bomb_s = 2.0 if quick else 30.0
    with tempfile.TemporaryDirectory(prefix="ocd-chaos-hostile-") as tmp:
        work = Path(tmp)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        ocd = Ocd(_config(work, port), nofile)
        try:
            await _healthy(base, ocd)
            return await _scenario(ocd, base, port, nofile, flood_n, waves, bombers, bomb_s)
        finally:
            code = ocd.stop()
            if code != 0:
                print(f"hostile: ocd exited {code}", file=sys.stderr)


async def _scenario(
    ocd: Ocd,
    base: str,
    port: int,
    nofile: int,
    flood_n: int,
    waves: int,
    bombers: int,
    bomb_s: float,
) -> dict[str, Any]:
    trickle, probe = Trickle(base), Probe(base)
    tasks = [asyncio.create_task(trickle.run()), asyncio.create_task(probe.run())]
    await asyncio.sleep(1.0)  # a baseline for the probe
    closed_s: list[float] = []
    still_open = 0
    for _ in range(waves):
        probe.phase = "flood"
        conns = await _flood(port, flood_n)
        opened = time.monotonic()
        done = await asyncio.gather(*(_closed(r) for r, _ in conns))
        for _, w in conns:
            w.close()
        still_open += sum(1 for t in done if t == float("inf"))
        closed_s.append(round(max(t for t in done if t != float("inf")) - opened, 2))
    probe.phase = "bomb"
    bomb = _bomb()
    answers: list[tuple[int, float]] = []

    async def bomber(token: bool) -> None:  # one bomb after another, for bomb_s
        deadline = time.monotonic() + bomb_s
        while time.monotonic() < deadline:
            answers.append(await _send_bomb(port, bomb, token))

    await asyncio.gather(*(bomber(token=i % 2 == 0) for i in range(bombers)))
    probe.phase = "after"
    await asyncio.sleep(1.0)
    trickle.stop.set()
    probe.stop.set()
    await asyncio.gather(*tasks)
    backlog = await _backlog(base)
    alive = ocd.proc.poll() is None
    lost = max(0, trickle.acked - backlog)
    statuses = sorted({s for s, _ in answers})
    expected = {413, 403}
    limit = ocd.first("descriptor_limit") or {}
    ok = (
        alive
        and lost == 0
        and not trickle.errors
        and still_open == 0
        and set(statuses) == expected
        and probe.failures == 0
    )
    return {
        "ok": ok,
        "lost": lost,
        "recovered": (
            f"kept serving through {waves} flood(s) of {flood_n} half-open connections at a "
            f"{nofile}-descriptor limit (all closed within {max(closed_s)} s) and {len(answers)} "
            f"gzip bombs (answered {statuses} in at most {max(t for _, t in answers):.2f} s)"
        ),
        "nofile": limit.get("nofile"),
        "max_connections": limit.get("max_connections"),
        "acked_sends": trickle.acked,
        "backlog_after": backlog,
        "send_errors": len(trickle.errors),
        "send_error_samples": trickle.errors[:3],
        "half_open_per_wave": flood_n,
        "half_open_closed_s": closed_s,
        "half_open_left_open": still_open,
        "bombs": len(answers),
        "bomb_statuses": statuses,
        "bomb_answer_s_max": round(max(t for _, t in answers), 3),
        "healthz_ms_median": {p: probe.median_ms(p) for p in ("baseline", "flood", "bomb")},
        "healthz_ms_worst": {p: probe.worst_ms(p) for p in ("baseline", "flood", "bomb")},
        "healthz_failures": probe.failures,
        "idle_evictions_logged": ocd.count("connections_limited"),
        "header_timeouts_logged": ocd.count("header_timeout"),
        "refused_503_logged": ocd.count("connections_refused"),
        "daemon_alive": alive,
    }
