"""The worker-facing API: marks recorded by ack/retry calls, bindings' argument handling."""

import datetime as dt
import logging
import types

import pytest

from ocd.pipeline import decode_all
from ocd.store import Delivery
from runtime import BatchMarks, Env, Message, MessageBatch, Queue, Response

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def batch_of(*ids):
    marks = BatchMarks()
    msgs = [Message(i, NOW, {"n": i}, 1, marks) for i in ids]
    return MessageBatch("jobs", msgs, {"backlogCount": 0}, marks), marks


def test_first_call_on_a_message_wins(caplog):
    batch, marks = batch_of("a", "b")
    a, b = batch.messages
    a.ack()
    with caplog.at_level(logging.WARNING):
        a.retry()
    b.retry(delaySeconds=5)
    b.ack()
    assert marks.acks == {"a"}
    assert marks.retries == {"b": 5}
    assert "Calling retry() on a message after calling ack() has no effect." in caplog.text


def test_ack_all_and_retry_all_exclude_each_other():
    batch, marks = batch_of("a")
    batch.ackAll()
    batch.retryAll(delaySeconds=3)
    assert marks.ack_all and not marks.retry_all
    batch2, marks2 = batch_of("a")
    batch2.retry_all({"delaySeconds": 3})
    batch2.ack_all()
    assert marks2.retry_all and marks2.retry_all_delay == 3 and not marks2.ack_all


def test_message_calls_after_ack_all_are_ignored():
    batch, marks = batch_of("a")
    batch.ackAll()
    batch.messages[0].retry()
    assert marks.retries == {}


def test_retry_delay_is_validated():
    batch, _ = batch_of("a")
    with pytest.raises(ValueError, match="between 0 and 86400"):
        batch.messages[0].retry(delaySeconds=86401)
    with pytest.raises(ValueError):
        batch.retryAll(delay_seconds=-1)


def test_metadata_metrics_has_attribute_access():
    batch, _ = batch_of("a")
    assert batch.metadata.metrics.backlogCount == 0
    assert batch.metadata["metrics"]["backlogCount"] == 0


class Recorder:
    def __init__(self):
        self.calls = []

    async def send_batch(self, items, batch_delay):
        self.calls.append((list(items), batch_delay))
        return {"backlogCount": 1, "backlogBytes": 2, "oldestMessageTimestamp": None}

    async def metrics(self):
        return {"backlogCount": 1, "backlogBytes": 2, "oldestMessageTimestamp": None}


async def test_send_accepts_keywords_options_dict_and_snake_case():
    rec = Recorder()
    q = Queue("jobs", rec)
    r = await q.send("x", contentType="text", delaySeconds=3)
    await q.send("y", {"contentType": "text", "delaySeconds": 4})
    await q.send("z", content_type="bytes", delay_seconds=5)
    assert [c[0][0] for c in rec.calls] == [
        ("x", "text", 3, None, None),
        ("y", "text", 4, None, None),
        ("z", "bytes", 5, None, None),
    ]
    assert r.metadata.metrics.backlogCount == 1


async def test_send_batch_forms():
    rec = Recorder()
    q = Queue("jobs", rec)
    await q.sendBatch(
        [{"body": 1}, {"body": "t", "contentType": "text", "delaySeconds": 2}], delaySeconds=9
    )
    await q.send_batch([{"body": 2, "delay_seconds": 1}])
    assert rec.calls[0] == ([(1, None, None, None, None), ("t", "text", 2, None, None)], 9)
    assert rec.calls[1] == ([(2, None, 1, None, None)], None)


async def test_send_batch_takes_any_mapping_and_refuses_what_is_not_one():
    rec = Recorder()
    q = Queue("jobs", rec)
    await q.sendBatch([types.MappingProxyType({"body": 1, "contentType": "json"}), {"body": 2}])
    assert rec.calls[0][0] == [(1, "json", None, None, None), (2, None, None, None, None)]
    with pytest.raises(TypeError, match="expects message objects"):
        await q.sendBatch([{"body": 1}, ("body", 2)])


def test_each_message_of_a_batch_has_its_own_send_time():
    sent = [1_767_225_600_000, 1_767_225_600_000, 1_767_225_601_500, 1_767_225_600_000]
    deliveries = [Delivery(i, f"m{i}", "json", b"{}", ms, 1, 7) for i, ms in enumerate(sent)] + [
        Delivery(9, "bad", "json", b"{", sent[2], 1, 7)
    ]
    messages, bad = decode_all(deliveries, BatchMarks(), False)
    assert [m.timestamp for m in messages] == [
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC) for ms in sent
    ]
    assert messages[2].timestamp == dt.datetime(2026, 1, 1, 0, 0, 1, 500_000, tzinfo=dt.UTC)
    assert [u.delivery.id for u in bad] == ["bad"]


async def test_send_batch_rejects_empty_and_bodyless():
    q = Queue("jobs", Recorder())
    with pytest.raises(TypeError, match=r"sendBatch\(\) requires at least one message"):
        await q.sendBatch([])
    with pytest.raises(TypeError, match="Message body cannot be undefined"):
        await q.sendBatch([{"contentType": "json"}])


def test_env_attribute_access_and_read_only():
    env = Env({"GREETING": "hi"})
    assert env.GREETING == "hi"
    with pytest.raises(AttributeError, match="MISSING"):
        _ = env.MISSING
    with pytest.raises(AttributeError):
        env.GREETING = "no"


def test_response_helpers():
    r = Response.json({"a": 1}, status=201)
    assert r.status == 201 and r.body == b'{"a": 1}'
    assert r.headers["Content-Type"] == "application/json"
    assert Response("hé").body == "hé".encode()
