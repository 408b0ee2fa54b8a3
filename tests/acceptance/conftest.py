"""The real ``ocd`` command as a subprocess, with a temp config and data dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers import wait_sync
from tests.pg import store_config_toml

STORE_SECTION_ENV = "OCD_TEST_STORE_SECTION"

APPS = Path(__file__).resolve().parent.parent / "apps"
REPO = Path(__file__).resolve().parents[2]


def ocd_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ocd", *args]


def run_ocd(
    *args: str, env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """Run ``ocd ARGS`` to completion (from the checkout, unless ``cwd``), capturing its
    output."""
    return subprocess.run(
        ocd_command(*args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=stdin,
        env=env,
    )


class OcdProcess:
    """One ``ocd serve`` run; collects its JSON log lines as they arrive."""

    def __init__(
        self,
        config: Path | None,  # None: no -c, ocd finds the project in ``cwd``
        extra_env: dict[str, str] | None = None,
        command: str = "serve",
        preexec_fn: Any = None,  # run in the child before ocd, e.g. to lower a resource limit
        args: tuple[str, ...] = (),
        cwd: Path = REPO,
    ) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.update(extra_env or {})
        given = () if config is None else ("-c", str(config))
        self.proc = subprocess.Popen(
            ocd_command(command, *given, "--log-format", "json", *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            preexec_fn=preexec_fn,
        )
        self.lines: list[str] = []
        self.stdout: list[str] = []
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._out_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.stdout.append(raw.decode(errors="replace").rstrip("\n"))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def event(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == name), None)

    def wait_started(self, timeout: float = 20) -> int:
        def started() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"ocd exited {self.proc.returncode}:\n{self.log}")
            return self.event("started")

        ev = wait_sync(started, timeout)
        return int(str(ev["listen"]).rsplit(":", 1)[1])

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        self._out_reader.join(5)
        for pipe in (self.proc.stderr, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def ocd_processes():
    procs: list[OcdProcess] = []

    def start(config: Path | None, **kw: Any) -> OcdProcess:
        p = OcdProcess(config, **kw)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.close()


@pytest.fixture(autouse=True)
def _daemons_store(request, store_backend, monkeypatch):
    """With ``OCD_TEST_STORE=postgres``, every daemon ``recorder_config`` writes uses a
    database of the test's own; tests of SQLite's own files are marked ``sqlite_only``."""
    if store_backend == "postgres" and "sqlite_only" not in request.keywords:
        section = store_config_toml("postgres", request.getfixturevalue("pg_dsn"))
        monkeypatch.setenv(STORE_SECTION_ENV, section)


def recorder_config(tmp: Path, consumers: str, port: int = 0, extra: str = "") -> Path:
    cfg = tmp / "ocd.toml"
    store = os.environ.get(STORE_SECTION_ENV, "")
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5
{extra}

{store}

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{tmp / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"

{consumers}
"""
    )
    return cfg


def records(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "record.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by kill -9 mid-write
            pass
    return out


async def produce(
    port: int, confirmed: set[int], stop: asyncio.Event, start: int, through_outages: bool = False
) -> None:
    """Send batches of 10 numbered messages to the recorder until ``stop``; remember the
    numbers whose send returned 200. When the daemon is gone the batch's fate is unknown:
    return, or (``through_outages``) try the next batch."""
    n = start
    async with aiohttp.ClientSession() as s:
        while not stop.is_set():
            msgs = [{"body": {"n": n + i}} for i in range(10)]
            try:
                async with s.post(
                    f"http://127.0.0.1:{port}/send-batch", json={"messages": msgs}
                ) as r:
                    if r.status == 200:
                        confirmed.update(range(n, n + 10))
            except aiohttp.ClientError:
                if stop.is_set() or not through_outages:
                    return
                await asyncio.sleep(0.05)  # not synchronisation: the pace of retries
                continue
            n += 10
