"""In-process daemons on 127.0.0.1 with a real data dir, driven over real HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from tests.pg import store_config_toml

APPS = Path(__file__).resolve().parent.parent / "apps"


class Running:
    def __init__(self, daemon: Daemon, record: Path, session: aiohttp.ClientSession) -> None:
        self.daemon = daemon
        self.record = record
        self.session = session
        self.base = f"http://127.0.0.1:{daemon.port}"

    def records(self, queue: str | None = None) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        rows = [json.loads(line) for line in self.record.read_text().splitlines() if line]
        return [r for r in rows if queue is None or r["queue"] == queue]

    @property
    def module(self) -> Any:
        return sys.modules[self.daemon.workers[0].module.__name__]

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.base + path, json=body) as r:
            return r.status, await r.json()

    async def send(self, body: Any = None, **spec: Any) -> Any:
        status, out = await self.post("/send", {"body": body, **spec})
        assert status == 200, out
        return out

    async def metrics(self, binding: str = "QUEUE") -> Any:
        status, out = await self.post("/metrics", {"binding": binding})
        assert status == 200, out
        return out


@pytest.fixture
def store_section(request, store_backend) -> str:
    """The ``[store]`` section for the backend under test (``$OCD_TEST_STORE``)."""
    dsn = request.getfixturevalue("pg_dsn") if store_backend == "postgres" else None
    return store_config_toml(store_backend, dsn)


@pytest.fixture
async def start_daemon(tmp_path, store_section):
    """``await start_daemon(consumers=..., queues=..., worker_extra=...)`` -> Running."""
    started: list[Running] = []
    session = aiohttp.ClientSession()

    async def start(
        consumers: str = "",
        queues: str = "",
        worker_extra: str = "",
        producers: str = "",
        clock: Any = None,
    ) -> Running:
        record = tmp_path / "record.jsonl"
        cfg = tmp_path / "ocd.toml"
        cfg.write_text(
            f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{store_section}

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{record}" }}
{worker_extra}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"
{producers}
{consumers}
{queues}
"""
        )
        config = load_config(cfg)
        daemon = Daemon(config, load_workers(config), **({"clock": clock} if clock else {}))
        daemon.retention_sweep_s = 0.02
        await daemon.start()
        running = Running(daemon, record, session)
        started.append(running)
        return running

    yield start
    for r in started:
        await r.daemon.shutdown(timeout_s=1)
    await session.close()
