"""Live reload: new code and settings apply, bad configs are refused whole, nothing is lost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from tests.helpers import eventually

WORKER = """
import json, os
from workers import Response, WorkerEntrypoint

VERSION = "{version}"

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.method == "POST":
            body = await request.json()
            await self.env.QUEUE.sendBatch([{{"body": b}} for b in body])
        return Response(VERSION)

    async def queue(self, batch, env, ctx):
        with open(env.RECORD, "a") as f:
            for m in batch.messages:
                f.write(json.dumps({{"n": m.body, "v": VERSION, "batch": len(batch.messages),
                                    "attempts": m.attempts}}) + "\\n")
"""


def config_text(tmp: Path, consumer: str) -> str:
    return f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"

[[workers]]
name = "app"
main = "app/worker.py"
routes = ["/"]
vars = {{ RECORD = "{tmp / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"
{consumer}
"""


CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = {size}
max_batch_timeout = 0
"""


class App:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        (tmp / "app").mkdir(exist_ok=True)
        self.daemon: Daemon | None = None
        self.session: aiohttp.ClientSession | None = None

    def write(self, version: str, consumer: str) -> None:
        (self.tmp / "app" / "worker.py").write_text(WORKER.format(version=version))
        (self.tmp / "ocd.toml").write_text(config_text(self.tmp, consumer))

    async def start(self) -> None:
        config = load_config(self.tmp / "ocd.toml")
        self.daemon = Daemon(config, load_workers(config))
        await self.daemon.start()
        self.session = aiohttp.ClientSession()

    @property
    def base(self) -> str:
        assert self.daemon is not None
        return f"http://127.0.0.1:{self.daemon.port}"

    async def get(self) -> str:
        assert self.session is not None
        async with self.session.get(self.base + "/") as r:
            return await r.text()

    async def send(self, numbers: list[int]) -> None:
        assert self.session is not None
        async with self.session.post(self.base + "/", json=numbers) as r:
            assert r.status == 200, await r.text()

    def records(self) -> list[dict]:
        path = self.tmp / "record.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.daemon is not None:
            await self.daemon.shutdown(timeout_s=2)


@pytest.fixture
async def app(tmp_path):
    a = App(tmp_path)
    yield a
    await a.close()


async def test_changed_code_serves_the_next_request_and_batch(app):
    app.write("v1", CONSUMER.format(size=10))
    await app.start()
    assert await app.get() == "v1"
    await app.send([1])
    await eventually(lambda: app.records())
    app.write("v2", CONSUMER.format(size=10))
    assert await app.daemon.reload() is True
    assert await app.get() == "v2"
    await app.send([2])
    rows = await eventually(lambda: len(app.records()) == 2 and app.records())
    assert [(r["n"], r["v"]) for r in rows] == [(1, "v1"), (2, "v2")]


async def test_added_consumer_starts_and_removed_one_stops(app):
    app.write("v1", "")
    await app.start()
    await app.send([1, 2, 3])
    assert app.records() == []  # no consumer yet: kept, not dropped
    app.write("v1", CONSUMER.format(size=10))
    assert await app.daemon.reload() is True
    await eventually(lambda: len(app.records()) == 3)
    app.write("v1", "")
    assert await app.daemon.reload() is True
    assert ("local", "jobs") not in app.daemon.dispatchers
    await app.send([4])
    backlog = await app.daemon.store.backlog(app.daemon.store.queue("jobs"))
    assert backlog.count == 1 and len(app.records()) == 3


async def test_changed_consumer_settings_apply_to_the_next_batch(app):
    app.write("v1", CONSUMER.format(size=1))
    await app.start()
    await app.send([1, 2])
    await eventually(lambda: len(app.records()) == 2)
    assert {r["batch"] for r in app.records()} == {1}
    app.write(
        "v1", CONSUMER.format(size=5).replace("max_batch_timeout = 0", "max_batch_timeout = 60")
    )
    assert await app.daemon.reload() is True
    await app.send(list(range(10, 15)))
    rows = await eventually(lambda: len(app.records()) == 7 and app.records())
    assert {r["batch"] for r in rows[2:]} == {5}


async def test_invalid_config_is_rejected_whole_and_the_running_one_stays(app, caplog):
    app.write("v1", CONSUMER.format(size=10))
    await app.start()
    (app.tmp / "ocd.toml").write_text(
        config_text(app.tmp, CONSUMER.format(size=500))  # out of range
    )
    (app.tmp / "app" / "worker.py").write_text(WORKER.format(version="v2"))
    assert await app.daemon.reload() is False
    assert "max_batch_size: expected an integer 1..100, got 500" in caplog.text
    assert await app.get() == "v1"
    await app.send([1])
    await eventually(lambda: app.records())
    (app.tmp / "ocd.toml").write_text(config_text(app.tmp, CONSUMER.format(size=10)))
    (app.tmp / "app" / "worker.py").write_text("raise RuntimeError('broken at import')\n")
    assert await app.daemon.reload() is False
    assert "broken at import" in caplog.text
    assert await app.get() == "v1"


async def test_reloads_under_load_lose_and_duplicate_nothing(app):
    app.write("v1", CONSUMER.format(size=10))
    await app.start()
    stop = asyncio.Event()
    sent: list[int] = []

    async def produce(k: int) -> None:
        n = k * 1_000_000
        while not stop.is_set():
            batch = list(range(n, n + 10))
            await app.send(batch)  # asserts every send during reloads succeeds
            sent.extend(batch)
            n += 10

    producers = [asyncio.create_task(produce(k)) for k in range(3)]
    for i in range(5):
        await eventually(lambda i=i: len(sent) >= (i + 1) * 200)
        app.write(f"v{i + 2}", CONSUMER.format(size=5 + i))
        assert await app.daemon.reload() is True
    stop.set()
    await asyncio.gather(*producers)
    rows = await eventually(lambda: len(app.records()) >= len(sent) and app.records(), timeout=30)
    delivered = [r["n"] for r in rows]
    assert sorted(delivered) == sorted(sent)  # each exactly once
    assert len({r["v"] for r in rows}) > 1
