"""FIFO queues end to end: a Worker sends with messageGroupId through its binding, a daemon
on 127.0.0.1 delivers to its consumer (``tests/apps/fifo_worker.py``), on the backend under
test. The consumer records what it did; the tests read the record."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from tests.helpers import eventually

APPS = Path(__file__).resolve().parent.parent / "apps"


class Fifo:
    def __init__(self, daemon: Daemon, record: Path, session: aiohttp.ClientSession) -> None:
        self.daemon = daemon
        self.record = record
        self.session = session
        self.base = f"http://127.0.0.1:{daemon.port}"

    def records(self, queue: str = "orders.fifo") -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        rows = [json.loads(line) for line in self.record.read_text().splitlines() if line]
        return [r for r in rows if r["queue"] == queue]

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.base + path, json=body) as r:
            return r.status, await r.json()

    async def send_batch(self, messages: list[dict[str, Any]]) -> None:
        status, out = await self.post("/send-batch", {"messages": messages})
        assert status == 200, out


@pytest.fixture
async def start_fifo(tmp_path, store_section):
    started: list[Fifo] = []
    session = aiohttp.ClientSession()

    async def start(consumer: str, queue_settings: str = "") -> Fifo:
        record = tmp_path / "record.jsonl"
        cfg = tmp_path / "ocd.toml"
        cfg.write_text(
            f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{store_section}

[[queues]]
name = "orders.fifo"
{queue_settings}

[[queues]]
name = "orders-dlq.fifo"

[[workers]]
name = "app"
main = "{APPS / "fifo_worker.py"}"
routes = ["/"]
vars = {{ RECORD = "{record}" }}

[[workers.queues.producers]]
binding = "ORDERS"
queue = "orders.fifo"

[[workers.queues.consumers]]
queue = "orders.fifo"
max_batch_timeout = 0
retry_delay = 0
dead_letter_queue = "orders-dlq.fifo"
{consumer}

[[workers.queues.consumers]]
queue = "orders-dlq.fifo"
max_batch_timeout = 0
"""
        )
        config = load_config(cfg)
        daemon = Daemon(config, load_workers(config))
        await daemon.start()
        f = Fifo(daemon, record, session)
        started.append(f)
        return f

    yield start
    for f in started:
        await f.daemon.shutdown(timeout_s=1)
    await session.close()


def by_group(rows: list[dict[str, Any]], did: str = "ok") -> dict[str, list[int]]:
    out: dict[str, list[int]] = collections.defaultdict(list)
    for r in rows:
        if r["did"] == did:
            out[r["group"]].append(r["n"])
    return out


async def test_a_consumer_sees_groups_in_order_with_their_fifo_fields(start_fifo):
    d = await start_fifo("max_batch_size = 10")
    await d.send_batch(
        [{"body": {"n": i}, "group": f"g{i % 3}", "dedup": f"d{i}"} for i in range(30)]
    )
    rows = await eventually(lambda: len(d.records()) == 30 and d.records())
    groups = by_group(rows)
    assert groups == {f"g{k}": list(range(k, 30, 3)) for k in range(3)}
    seqs = [r["seq"] for r in sorted(rows, key=lambda r: r["n"])]
    assert seqs == sorted(seqs) and len(set(seqs)) == 30
    assert {r["dedup"] for r in rows} == {f"d{i}" for i in range(30)}


async def test_a_duplicate_send_within_the_window_is_accepted_and_not_delivered(start_fifo):
    d = await start_fifo("max_batch_size = 10")
    for _ in range(3):
        status, out = await d.post("/send", {"body": {"n": 1}, "group": "g", "dedup": "order-9"})
        assert status == 200, out
    status, out = await d.post("/send", {"body": {"n": 2}, "group": "g", "dedup": "order-10"})
    assert status == 200, out
    rows = await eventually(lambda: len(d.records()) >= 2 and d.records())
    assert [r["n"] for r in rows] == [1, 2]


async def test_content_based_deduplication_uses_the_body(start_fifo):
    d = await start_fifo("max_batch_size = 10", "content_based_deduplication = true")
    for n in (1, 1, 2):
        status, out = await d.post("/send", {"body": {"n": n}, "group": "g"})
        assert status == 200, out
    rows = await eventually(lambda: len(d.records()) >= 2 and d.records())
    assert [r["n"] for r in rows] == [1, 2]


async def test_fifo_keys_are_checked_at_the_binding(start_fifo):
    d = await start_fifo("max_batch_size = 10")
    status, out = await d.post("/send", {"body": {"n": 1}, "dedup": "x"})
    assert status == 400 and out["error"] == "QueueSendArgumentError"
    assert "messageGroupId is required" in out["message"]
    status, out = await d.post("/send", {"body": {"n": 1}, "group": "has space", "dedup": "x"})
    assert status == 400 and "messageGroupId" in out["message"]
    status, out = await d.post("/send", {"body": {"n": 1}, "group": "g"})
    assert status == 400 and "messageDeduplicationId is required" in out["message"]


async def test_a_poison_message_dead_letters_and_its_group_moves_on(start_fifo):
    d = await start_fifo("max_batch_size = 10\nmax_retries = 2")
    await d.send_batch(
        [
            {"body": {"n": 0, "poison": True}, "group": "a", "dedup": "0"},
            {"body": {"n": 1}, "group": "a", "dedup": "1"},
            {"body": {"n": 2}, "group": "b", "dedup": "2"},
        ]
    )
    await eventually(lambda: by_group(d.records()).get("a") == [1])
    rows = d.records()
    poison = [r for r in rows if r["n"] == 0]
    assert [r["attempts"] for r in poison] == [1, 2, 3]  # max_retries + 1, then dead-lettered
    # n=1 waited behind the poison message: it was never processed before it left
    first_ok = next(i for i, r in enumerate(rows) if r["n"] == 1 and r["did"] == "ok")
    assert all(r["n"] != 0 for r in rows[first_ok:])
    assert by_group(rows)["b"] == [2]
    dead = await eventually(lambda: d.records("orders-dlq.fifo"))
    assert dead[0]["n"] == 0 and dead[0]["group"] == "a"


@pytest.mark.timeout(180)
async def test_thousand_groups_with_random_retries_keep_order_and_lose_nothing(start_fifo):
    groups, per_group = 1000, 100
    d = await start_fifo("max_batch_size = 100\nmax_concurrency = 2\nmax_retries = 50")
    # Each sendBatch holds 100 messages of 100 groups, so groups interleave in the queue.
    for k in range(per_group):
        for b in range(0, groups, 100):
            await d.send_batch(
                [
                    {"body": {"n": k, "chaos": 0.05}, "group": f"g{g}", "dedup": f"{k}-{g}"}
                    for g in range(b, b + 100)
                ]
            )

    def done() -> bool:  # a cheap look: the daemon shares this event loop
        return (
            d.record.exists() and d.record.read_bytes().count(b'"did": "ok"') >= groups * per_group
        )

    await eventually(done, 150, interval=0.25)
    rows = d.records()
    ok = by_group(rows)
    # every message processed exactly once, and in each group in send order
    assert ok == {f"g{g}": list(range(per_group)) for g in range(groups)}
    assert any(r["did"] == "retry" for r in rows), "the chaos made no retries"
    assert any(r["attempts"] > 1 for r in rows)
    assert d.records("orders-dlq.fifo") == []
