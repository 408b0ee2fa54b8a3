"""Running a real ``ocd serve`` for the benchmarks: config, process, HTTP, where each run's
daemons live, and statistics.

The daemon runs with ``--log-level warning`` so that per-batch log lines cost nothing; the
``started`` line is an info line, so the harness picks a free port itself and waits for
``/__ocd/healthz`` instead of reading the port from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "apps" / "bench_worker.py"
RESULTS = Path(__file__).resolve().parent / "results"
OCD_SERVE = (sys.executable, "-m", "ocd", "serve", "--log-format", "json", "--log-level", "warning")
POLL_S = 0.02
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STOP_TIMEOUT_S = 120.0


class BenchError(Exception):
    """A scenario could not complete (daemon died, timeout, bad answer)."""


# ------------------------------------------------------------------------------ config


@dataclass(frozen=True)
class Consumer:
    queue: str
    max_batch_size: int = 100
    max_batch_timeout_s: float = 0
    max_retries: int = 3


@dataclass(frozen=True)
class Setup:
    """One daemon's config: the bench worker with a producer binding per queue; with a
    ``dsn``, the PostgreSQL store on that database (``data_dir`` is then unused)."""

    data_dir: Path
    producers: dict[str, str]  # binding -> queue
    consumers: tuple[Consumer, ...] = ()
    vars: dict[str, int] = field(default_factory=dict)
    dsn: str | None = None
    extra_toml: str = ""  # more sections, e.g. [sqs]

    def toml(self, port: int) -> str:
        lines = [
            "[server]",
            f'listen = "127.0.0.1:{port}"',
            f'data_dir = "{self.data_dir}"',
            'durability = "full"',
            "shutdown_timeout = 10",
            "",
        ]
        if self.dsn is not None:
            # A JSON string of ASCII text is a valid TOML basic string.
            lines += ["[store]", 'backend = "postgres"', f"dsn = {json.dumps(self.dsn)}", ""]
        if self.extra_toml:
            lines += [self.extra_toml, ""]
        lines += [
            "[[workers]]",
            'name = "bench"',
            f'main = "{WORKER}"',
            'routes = ["/"]',
            "vars = { " + ", ".join(f"{k} = {v}" for k, v in self.vars.items()) + " }",
        ]
        for binding, queue in self.producers.items():
            lines += ["", "[[workers.queues.producers]]", f'binding = "{binding}"']
            lines.append(f'queue = "{queue}"')
        for c in self.consumers:
            lines += [
                "",
                "[[workers.queues.consumers]]",
                f'queue = "{c.queue}"',
                f"max_batch_size = {c.max_batch_size}",
                f"max_batch_timeout = {c.max_batch_timeout_s}",
                f"max_retries = {c.max_retries}",
            ]
        return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until_up(url: str, timeout_s: float, check_alive: Callable[[], None]) -> bool:
    """Poll ``url`` until it answers 200 (True) or ``timeout_s`` passes (False);
    ``check_alive`` raises if the server's process has exited meanwhile."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            check_alive()
            try:
                async with s.get(url) as r:
                    if r.status == 200:
                        return True
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(POLL_S)
    return False


# ------------------------------------------------------------------------------ the daemon


class Daemon:
    """One ``ocd serve`` subprocess. Use ``async with``: it is always stopped, and killed if
    it does not stop by itself."""

    def __init__(self, setup: Setup, config_path: Path, env: dict[str, str] | None = None):
        self.setup = setup
        self.config_path = config_path
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.startup_s = 0.0
        self.exit_code: int | None = None
        self.session: aiohttp.ClientSession | None = None
        self._log: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None

    async def __aenter__(self) -> Daemon:
        try:
            await self._start()
            self.session = aiohttp.ClientSession(
                self.url, timeout=aiohttp.ClientTimeout(total=None)
            )
        except BaseException:
            self.kill()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            if self.session is not None:
                await self.session.close()
            if exc_info[0] is None:
                self.stop()
        finally:
            self.kill()

    async def _start(self) -> None:
        self.port = free_port()
        self.config_path.write_text(self.setup.toml(self.port))
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [*OCD_SERVE, "-c", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=REPO,
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        await self._wait_healthy(timeout_s=300)
        self.startup_s = time.perf_counter() - started

    def _read_log(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._log.append(raw.decode(errors="replace").rstrip("\n"))

    async def _wait_healthy(self, timeout_s: float) -> None:
        url = f"http://127.0.0.1:{self.port}/__ocd/healthz"
        if not await wait_until_up(url, timeout_s, self.check_alive):
            raise BenchError(f"ocd did not become healthy within {timeout_s} s\n{self.log}")

    @property
    def log(self) -> str:
        return "\n".join(self._log)

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise BenchError(f"ocd exited with code {self.proc.returncode}:\n{self.log}")

    def rss_mb(self) -> float:
        """The daemon's resident set size (VmRSS) in MiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise BenchError("no VmRSS in /proc/PID/status")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """CPU time (user + system, all threads) the daemon has used so far."""
        assert self.proc is not None
        return process_cpu_s(self.proc.pid)

    def stop(self) -> float:
        """SIGTERM and wait for a clean exit; the seconds it took."""
        assert self.proc is not None
        started = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BenchError(f"ocd did not stop within {STOP_TIMEOUT_S} s\n{self.log}") from None
        if self.exit_code != 0:
            raise BenchError(f"ocd exited with code {self.exit_code}:\n{self.log}")
        return time.perf_counter() - started

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    # -------------------------------------------------------------------------- HTTP

    async def get(self, path: str) -> Any:
        assert self.session is not None
        async with self.session.get(path) as r:
            if r.status != 200:
                raise BenchError(f"GET {path}: {r.status} {await r.text()}\n{self.log}")
            return await r.json()

    async def commits(self) -> dict[str, float]:
        """Group commits so far, by the thread that ran them ("loop", "writer"), and the
        operations they held ("operations"), from the daemon's Prometheus metrics."""
        assert self.session is not None
        async with self.session.get("/__ocd/metrics") as r:
            text = await r.text()
        out = {"loop": 0.0, "writer": 0.0, "operations": 0.0}
        for family in text_string_to_metric_families(text):
            if family.name != "ocd_group_commit_operations":
                continue
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    out[sample.labels["thread"]] += sample.value
                elif sample.name.endswith("_sum"):
                    out["operations"] += sample.value
        return out

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        assert self.session is not None
        async with self.session.post(path, json=body) as r:
            if r.status != 200:
                raise BenchError(f"POST {path}: {r.status} {await r.text()}\n{self.log}")
            return await r.json()

    async def wait_stats(
        self,
        done: Callable[[dict[str, Any]], bool],
        timeout_s: float,
        on_poll: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Poll the worker's ``/stats`` every ``POLL_S`` until ``done(stats)``."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_alive()
            stats: dict[str, Any] = await self.get("/stats")
            if on_poll is not None:
                on_poll()
            if done(stats):
                return stats
            if time.monotonic() > deadline:
                raise BenchError(f"timed out after {timeout_s} s; last stats {stats}")
            await asyncio.sleep(POLL_S)


# ------------------------------------------------------------------------------ runs


def timeout_for(messages: int) -> float:
    """Give up on a phase that runs slower than 500 messages/s."""
    return 60 + messages / 500


class Bench:
    """Where daemons live: one temp root for the whole bench, one subdir per run; and the
    run's PostgreSQL server (``pgserver.PgServer``), when the bench has one."""

    def __init__(self, root: Path, profile: bool, pg: Any = None) -> None:
        self.root = root
        self.profile = profile
        self.pg = pg

    @contextlib.contextmanager
    def workdir(self, name: str) -> Iterator[Path]:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def profile_env(self, name: str) -> dict[str, str]:
        """With ``--profile``, the environment that has a daemon's bench worker profile its
        event loop until ``POST /profile`` writes ``results/profile-<name>.prof``; else none."""
        if not self.profile:
            return {}
        RESULTS.mkdir(parents=True, exist_ok=True)
        return {"OCD_BENCH_PROFILE": str(RESULTS / f"profile-{name}.prof")}

    @contextlib.asynccontextmanager
    async def daemon(self, name: str, work: Path, setup: Setup) -> AsyncIterator[Daemon]:
        env = self.profile_env(name)
        async with Daemon(setup, work / f"{name}.toml", env) as d:
            yield d
            if self.profile:
                await d.post("/profile", {})


# ------------------------------------------------------------------------------ statistics


def process_cpu_s(pid: int) -> float:
    """CPU time (user + system, all threads) process ``pid`` has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def host_busy_s() -> float:
    """CPU seconds all processes on this machine have used (all CPUs, from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / CLOCK_TICKS


class Measured(Protocol):
    """A server process whose CPU time a ``CpuWindow`` reads."""

    def cpu_s(self) -> float: ...


class CpuWindow:
    """CPU use from now until ``usage()``, in % of one core: the measured server's
    (``daemon_cpu_pct``), this process's (``bench_cpu_pct``: the HTTP load generator, or
    just the ``/stats`` polling), and everything else's on the machine. A large
    ``other_cpu_pct`` means other work competed for the CPUs and the numbers of that run
    are suspect."""

    def __init__(self, server: Measured) -> None:
        self.server = server
        self.wall = time.perf_counter()
        self.server_s = server.cpu_s()
        self.bench_s = time.process_time()
        self.host_s = host_busy_s()

    def usage(self) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        server = self.server.cpu_s() - self.server_s
        bench = time.process_time() - self.bench_s
        other = host_busy_s() - self.host_s - server - bench
        return {
            "daemon_cpu_pct": round(100 * server / wall, 1),
            "bench_cpu_pct": round(100 * bench / wall, 1),
            # /proc/stat is sampled per tick, a process's own time more finely: clamp.
            "other_cpu_pct": round(max(0.0, 100 * other / wall), 1),
        }


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile, ``p`` in (0, 100]."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
