"""Poison messages through ``ocd serve`` and ``ocd consume`` as processes: a body ocd cannot
decode, written into the real database while ocd is stopped (as another version's codec, a
restore or damage would leave it), is dead-lettered at once; the healthy messages beside it
are delivered once each, and the daemon goes idle."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from ocd.config import load_config
from ocd.store import NewMessage, make_store
from tests.acceptance.conftest import recorder_config, records
from tests.acceptance.test_consume import Consume, _api, _queue, _recorder
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 2
dead_letter_queue = "jobs-dlq"

[[queues]]
name = "jobs-dlq"
"""
BAD = b'{"written by": "another codec"'  # a json message whose body is not JSON


def _messages(n_good: int) -> tuple[NewMessage, list[NewMessage]]:
    now = int(time.time() * 1000)

    def message(body: bytes) -> NewMessage:
        return NewMessage(uuid.uuid4().hex, "json", body, now, now)

    return message(BAD), [message(f'{{"n": {i}}}'.encode()) for i in range(n_good)]


async def _write_while_stopped(cfg: Path, queue: str, messages: list[NewMessage]) -> None:
    """Store ``messages`` (bodies as given, no codec) through ocd's own store code."""
    sc = load_config(cfg).store
    store = make_store(sc.backend, data_dir=sc.data_dir, dsn=sc.dsn)
    await store.open(int(time.time() * 1000))
    try:
        q = store.queue(queue)
        assert q is not None, f"queue {queue} was not made by the first start"
        await store.enqueue(q, messages)
    finally:
        await store.close()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _assert_idle(pid: int, batches: Callable[[], int], window_s: float = 2.0) -> None:
    """Over a window after everything settled, no batch runs and the process (which used a
    whole core in the loop this guards against) uses a small part of one."""
    before_batches, before_cpu = batches(), _cpu_s(pid)
    time.sleep(window_s)  # a measuring window, not a wait for something to happen
    used = _cpu_s(pid) - before_cpu
    assert batches() == before_batches, "batches went on running after the queue was empty"
    assert used < window_s * 0.3, f"{used:.2f} s of CPU in {window_s} s: the daemon is busy"


async def test_serve_dead_letters_an_undecodable_body_and_goes_idle(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, CONSUMER)
    first = ocd_processes(cfg)
    first.wait_started()
    assert first.stop() == 0
    bad, good = _messages(5)
    await _write_while_stopped(cfg, "jobs", [good[0], bad, *good[1:]])

    p = ocd_processes(cfg)
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:

        async def settled() -> bool:
            dlq = await _api(s, port, "GET", "/queues/jobs-dlq/metrics")
            src = await _api(s, port, "GET", "/queues/jobs/metrics")
            return dlq["backlog_count"] == 1 and src["backlog_count"] == 0

        await eventually(settled, 30)
        await eventually(lambda: len(records(tmp_path)) >= 5, 30)
    rows = records(tmp_path)
    assert sorted(r["body"]["n"] for r in rows) == [0, 1, 2, 3, 4]  # once each
    assert all(r["attempts"] == 1 for r in rows)
    ev = p.event("message_undecodable")
    assert ev is not None, p.log
    assert ev["id"] == bad.id and ev["queue"] == "jobs" and ev["dead_letter_queue"] == "jobs-dlq"
    assert "JSONDecodeError" in ev["reason"]
    assert p.event("delivery_fault") is None and p.event("handler_failed") is None

    def batches() -> int:
        return sum(1 for e in p.events if e.get("event") in ("batch_acked", "batch_retried"))

    _assert_idle(p.proc.pid, batches)
    assert p.stop() == 0


async def test_consume_dead_letters_an_undecodable_body(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, "")
    first = ocd_processes(cfg)
    port = first.wait_started()
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "remote", max_retries=2, retry_delay=0)
    assert first.stop() == 0
    bad, good = _messages(3)
    await _write_while_stopped(cfg, "remote", [bad, *good])

    p = ocd_processes(cfg)
    port = p.wait_started()
    c = Consume(tmp_path, port, "remote", *_recorder(tmp_path), "--batch-size", "10")
    try:
        async with aiohttp.ClientSession() as s:

            async def settled() -> bool:
                dlq = await _api(s, port, "GET", "/queues/remote-dlq/metrics")
                src = await _api(s, port, "GET", "/queues/remote/metrics")
                return dlq["backlog_count"] == 1 and src["backlog_count"] == 0

            await eventually(settled, 30)
        rows = records(tmp_path)
        assert sorted(r["body"]["n"] for r in rows) == [0, 1, 2]
        assert all(r["attempts"] == 1 for r in rows)
        [ev] = c.events("message_undecodable")  # said by the consumer ...
        assert ev["id"] == bad.id and "JSONDecodeError" in ev["reason"]
        daemon_ev = p.event("message_undecodable")  # ... and by the daemon it told
        assert daemon_ev is not None and daemon_ev["id"] == bad.id
        assert daemon_ev["dead_letter_queue"] == "remote-dlq"
        c.proc.send_signal(15)
        assert c.proc.wait(30) == 0
    finally:
        c.close()
    assert p.stop() == 0
