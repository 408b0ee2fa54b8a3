"""Poison messages cannot stall a queue: a body ocd cannot decode is that message's failure
alone, failures of ocd's own spend attempts and back off, and a dead store loop is noticed.
In-process daemons on 127.0.0.1, on the backend under test; the bad bodies are written into
the real database through the store, as another version's codec or damage would leave them."""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import time
import uuid

import aiohttp
import pytest

from ocd.dispatch import Dispatcher
from ocd.errors import StoreLoopDied
from ocd.store import NewMessage, QueueRecord
from tests.helpers import eventually
from tests.integration.rest import Rest
from tests.integration.sqs import start as sqs_start

pytestmark = pytest.mark.timeout(60)

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 2
dead_letter_queue = "jobs-dlq"
"""
DLQ = """
[[queues]]
name = "jobs-dlq"
"""


def _message(body: bytes, content_type: str = "json", group: str | None = None) -> NewMessage:
    now = int(time.time() * 1000)
    dedup = uuid.uuid4().hex if group else None
    return NewMessage(uuid.uuid4().hex, content_type, body, now, now, group, dedup)


async def _enqueue(d, name: str, messages: list[NewMessage]) -> QueueRecord:
    store = d.daemon.store
    q = store.queue(name)
    assert q is not None
    if q.fifo:
        await store.enqueue_fifo(q, messages)
    else:
        await store.enqueue(q, messages)
    return q


async def _backlog(d, name: str) -> int:
    store = d.daemon.store
    return (await store.backlog(store.queue(name))).count


def _undecodable_metric(d, queue: str) -> float:
    value = d.daemon.metrics.registry.get_sample_value(
        "ocd_messages_undecodable_total", {"account": "local", "queue": queue}
    )
    return value or 0.0


async def test_an_undecodable_body_is_dead_lettered_and_the_rest_delivered(start_daemon, caplog):
    caplog.set_level(logging.INFO)
    d = await start_daemon(consumers=CONSUMER, queues=DLQ)
    bad = _message(b'{"half a json', "json")
    good = [_message(f'{{"n": {i}}}'.encode()) for i in range(5)]
    await _enqueue(d, "jobs", [good[0], good[1], bad, *good[2:]])  # one batch, one commit

    async def settled() -> bool:
        return await _backlog(d, "jobs") == 0 and await _backlog(d, "jobs-dlq") == 1

    await eventually(settled, 20)
    rows = d.records("jobs")
    assert sorted(r["body"]["n"] for r in rows) == [0, 1, 2, 3, 4]  # once each
    assert all(r["attempts"] == 1 for r in rows)
    assert bad.id not in {r["id"] for r in rows}
    dead = await d.daemon.store.peek(d.daemon.store.queue("jobs-dlq"), 2**62, 10)
    assert [m.id for m in dead] == [bad.id] and dead[0].body == bad.body  # kept as it was
    lines = [r for r in caplog.records if getattr(r, "event", None) == "message_undecodable"]
    assert len(lines) == 1
    line = lines[0]
    assert (line.queue, line.id, line.dead_letter_queue) == ("jobs", bad.id, "jobs-dlq")
    assert "json body" in line.reason and "JSONDecodeError" in line.reason
    assert "cannot be decoded" in line.getMessage()
    assert _undecodable_metric(d, "jobs") == 1
    # no handler failure, no retry: the healthy messages' batch went as if it were alone
    outcome = d.daemon.dispatchers[("local", "jobs")].last_outcome
    assert outcome is not None and outcome["outcome"] == "ok" and outcome["retried"] == 0


async def test_without_a_dead_letter_queue_an_undecodable_body_is_deleted(start_daemon, caplog):
    caplog.set_level(logging.INFO)
    consumer = CONSUMER.replace('dead_letter_queue = "jobs-dlq"\n', "")
    d = await start_daemon(consumers=consumer)
    bad = _message(b"\xff\xfe not text", "text")
    await _enqueue(d, "jobs", [bad, _message(b'"fine"')])
    await eventually(lambda: len(d.records("jobs")) == 1, 20)

    async def empty() -> bool:
        return await _backlog(d, "jobs") == 0

    await eventually(empty, 20)
    line = next(r for r in caplog.records if getattr(r, "event", None) == "message_undecodable")
    assert line.id == bad.id and "deleted (no dead-letter queue)" in line.getMessage()
    assert "UnicodeDecodeError" in line.reason


FIFO = """
[[workers.queues.consumers]]
queue = "orders.fifo"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 2
dead_letter_queue = "orders-dlq.fifo"
"""
FIFO_QUEUES = """
[[queues]]
name = "orders.fifo"

[[queues]]
name = "orders-dlq.fifo"
"""


async def test_fifo_a_group_moves_on_past_its_undecodable_head(start_daemon):
    d = await start_daemon(consumers=FIFO, queues=FIFO_QUEUES)
    bad = _message(b"\x00 not json", "json", group="a")
    await _enqueue(
        d,
        "orders.fifo",
        [
            bad,
            _message(b'{"n": "a1"}', group="a"),
            _message(b'{"n": "a2"}', group="a"),
            _message(b'{"n": "b1"}', group="b"),
        ],
    )

    async def settled() -> bool:
        return await _backlog(d, "orders.fifo") == 0 and await _backlog(d, "orders-dlq.fifo") == 1

    await eventually(settled, 20)
    rows = d.records("orders.fifo")
    assert [r["body"]["n"] for r in rows if r["group"] == "a"] == ["a1", "a2"]
    assert [r["body"]["n"] for r in rows if r["group"] == "b"] == ["b1"]
    assert all(r["attempts"] == 1 for r in rows)


async def test_a_failure_of_ocds_own_spends_attempts_backs_off_and_dead_letters(
    start_daemon, caplog, monkeypatch
):
    """An exception inside the pipeline before the handler runs (here: building the batch's
    metadata) is a failed delivery: attempts are spent, tries are spaced by a backoff, and
    after max_retries + 1 the message dead-letters. One traceback for the burst."""
    caplog.set_level(logging.INFO)
    tries: list[float] = []

    async def broken(self: Dispatcher, q: QueueRecord) -> dict[str, object]:
        tries.append(time.monotonic())
        raise RuntimeError("injected fault")

    monkeypatch.setattr(Dispatcher, "_backlog", broken)
    d = await start_daemon(consumers=CONSUMER, queues=DLQ)
    await d.send({"n": 1})

    async def dead_lettered() -> bool:
        return await _backlog(d, "jobs") == 0 and await _backlog(d, "jobs-dlq") == 1

    await eventually(dead_lettered, 30)
    assert len(tries) == 3  # max_retries + 1 deliveries, each spent
    assert d.records("jobs") == []  # the handler never ran
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert all(g >= 0.05 for g in gaps), gaps  # backed off between tries (0.1 s, jittered)
    faults = [r for r in caplog.records if getattr(r, "event", None) == "delivery_fault"]
    assert len(faults) == 1 and faults[0].exc_info is not None  # once per burst
    assert "injected fault" in faults[0].getMessage()
    dead = [r for r in caplog.records if getattr(r, "event", None) == "message_dead_lettered"]
    assert len(dead) == 1 and dead[0].attempts == 3
    outcome = d.daemon.dispatchers[("local", "jobs")].last_outcome
    assert outcome is not None and outcome["outcome"] == "internalError"
    assert "injected fault" in outcome["error"]


async def test_delivery_recovers_after_a_burst_of_faults(start_daemon, caplog, monkeypatch):
    caplog.set_level(logging.INFO)
    failing = {"left": 1}
    original = Dispatcher._backlog

    async def flaky(self: Dispatcher, q: QueueRecord) -> dict[str, object]:
        if failing["left"]:
            failing["left"] -= 1
            raise RuntimeError("injected once")
        return await original(self, q)

    monkeypatch.setattr(Dispatcher, "_backlog", flaky)
    d = await start_daemon(consumers=CONSUMER, queues=DLQ)
    await d.send({"n": 1})
    rows = await eventually(lambda: d.records("jobs"), 20)
    assert rows[0]["attempts"] == 2  # the failed try counted
    await eventually(
        lambda: any(getattr(r, "event", None) == "delivery_recovered" for r in caplog.records)
    )


async def test_pull_returns_an_undecodable_body_as_its_raw_bytes(start_daemon):
    d = await start_daemon(queues='[[queues]]\nname = "pulled"\n')
    rest = Rest(d, token=None)
    await rest.ok("POST", "/queues/pulled/consumers", {"type": "http_pull"})
    bad_text = _message(b"\xff\xfe\x00raw", "text")
    bad_json = _message(b"{nope", "json")
    await _enqueue(d, "pulled", [bad_text, bad_json])
    out = await rest.ok("POST", "/queues/pulled/messages/pull", {"batch_size": 10})
    got = {m["id"]: m for m in out["messages"]}
    assert got[bad_text.id]["metadata"]["CF-Content-Type"] == "bytes"
    assert base64.b64decode(got[bad_text.id]["body"]) == bad_text.body
    assert got[bad_json.id]["metadata"]["CF-Content-Type"] == "json"
    assert base64.b64decode(got[bad_json.id]["body"]) == bad_json.body
    # a pull consumer that cannot decode it either dead-letters it at once
    lease = got[bad_json.id]["lease_id"]
    acked = await rest.ok(
        "POST",
        "/queues/pulled/messages/ack",
        {"undecodable": [{"lease_id": lease, "reason": "not JSON"}]},
    )
    assert acked["warnings"] == {}
    assert await _backlog(d, "pulled") == 1  # only the text one, still leased


async def test_a_killed_store_loop_stops_the_daemon(start_daemon, caplog):
    d = await start_daemon(consumers=CONSUMER, queues=DLQ)
    loops = d.daemon.store.background()
    assert loops, "the store reports its loops"
    writer = next(t for t in loops if "writer" in t.get_name())
    writer.cancel()
    await asyncio.wait_for(d.daemon.wait_failed(), 10)
    assert isinstance(d.daemon.failure, StoreLoopDied)
    assert writer.get_name() in str(d.daemon.failure)
    died = [r for r in caplog.records if getattr(r, "event", None) == "task_died"]
    assert died and died[0].levelno == logging.CRITICAL


@pytest.fixture
async def sqs(tmp_path, store_section):
    session = aiohttp.ClientSession()
    d = await sqs_start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def test_sqs_receive_returns_an_undecodable_body_as_its_raw_bytes(sqs):
    url = (await sqs.call(sqs.sqs.create_queue, QueueName="raw"))["QueueUrl"]
    bad_text = _message(b"\xff\xfe\x00raw", "text")
    bad_json = _message(b"{nope", "json")
    await _enqueue(sqs, "raw", [bad_text, bad_json])
    out = await sqs.call(
        sqs.sqs.receive_message,
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
    )
    got = {m["MessageId"]: m for m in out["Messages"]}
    text = got[_uuid(bad_text.id)]
    assert base64.b64decode(text["Body"]) == bad_text.body  # not UTF-8: base64, unaltered
    assert text["MessageAttributes"]["ocd.contentType"]["StringValue"] == "text"
    assert got[_uuid(bad_json.id)]["Body"] == "{nope"  # valid UTF-8: as it is


def _uuid(mid: str) -> str:
    return f"{mid[:8]}-{mid[8:12]}-{mid[12:16]}-{mid[16:20]}-{mid[20:]}"
