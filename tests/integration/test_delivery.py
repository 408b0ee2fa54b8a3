"""Producer -> scheduler.sqlite -> push consumer, through a real daemon on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import re

from tests.helpers import FakeClock, eventually

FAST = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 2
dead_letter_queue = "jobs-dlq"

[[workers.queues.consumers]]
queue = "jobs-dlq"
max_batch_timeout = 0
"""


async def test_each_content_type_round_trips(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"hello": "world"})
    await d.send("plain", contentType="text")
    await d.post(
        "/send", {"b64": base64.b64encode(b"\x00\xffraw").decode(), "contentType": "bytes"}
    )
    await d.post("/send", {"v8_sample": True, "contentType": "v8"})
    rows = await eventually(lambda: len(d.records("jobs")) == 4 and d.records("jobs"))
    by_type = {r["type"]: r for r in rows if "v8_equal" not in r}
    assert by_type["dict"]["body"] == {"hello": "world"}
    assert by_type["str"]["body"] == "plain"
    assert base64.b64decode(by_type["bytes"]["body"]["b64"]) == b"\x00\xffraw"
    assert [r for r in rows if r.get("v8_equal")], "v8 body did not come back equal"
    for r in rows:
        assert len(r["id"]) == 32 and int(r["id"], 16) >= 0
        assert r["attempts"] == 1
        assert dt.datetime.fromisoformat(r["ts"]).tzinfo is not None


async def test_send_rejections_use_workerd_texts_and_store_nothing(start_daemon):
    d = await start_daemon()
    cases = [
        (
            {"body": 5, "contentType": "text"},
            "TypeError",
            'Content Type "text" requires a value of type string, but received: number',
        ),
        (
            {"body": "x", "contentType": "yaml"},
            "TypeError",
            "Unsupported queue message content type: yaml",
        ),
        ({"body": "x" * 128_001, "contentType": "text"}, "QueueSendError", "(10204)"),
        ({"body": "x", "delaySeconds": 86_401}, "QueueSendError", "(10203)"),
    ]
    for spec, kind, text in cases:
        status, out = await d.post("/send", spec)
        assert status == 400 and out["error"] == kind and text in out["message"], out
    status, out = await d.post("/send-batch", {"messages": [{"body": i} for i in range(101)]})
    assert "(10206)" in out["message"]
    big = [{"body": "y" * 100_000, "contentType": "text"} for _ in range(3)]
    status, out = await d.post("/send-batch", {"messages": big})
    assert "(10205)" in out["message"]
    # the last message of this batch is bad: nothing from it may be stored
    status, out = await d.post(
        "/send-batch", {"messages": [{"body": "ok"}, {"body": 1, "contentType": "text"}]}
    )
    assert status == 400
    assert (await d.metrics())["backlogCount"] == 0


async def test_send_returns_backlog_metrics(start_daemon):
    d = await start_daemon()
    out = await d.send({"a": 1})
    m = out["metadata"]["metrics"]
    assert m["backlogCount"] == 1 and m["backlogBytes"] == len('{"a":1}')
    assert dt.datetime.fromisoformat(m["oldestMessageTimestamp"]).tzinfo is not None
    status, out = await d.post(
        "/send-batch", {"messages": [{"body": 1}, {"body": 2}], "delaySeconds": 60}
    )
    assert status == 200 and out["metadata"]["metrics"]["backlogCount"] == 3


async def test_failing_handler_retries_then_dead_letters_with_exact_attempts(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"fail": True, "n": 1})
    dlq = await eventually(lambda: d.records("jobs-dlq"), timeout=15)
    assert [r["attempts"] for r in d.records("jobs")] == [1, 2, 3]  # max_retries = 2
    assert len(dlq) == 1 and dlq[0]["attempts"] == 1
    first = d.records("jobs")[0]
    assert dlq[0]["id"] == first["id"] and dlq[0]["ts"] == first["ts"]


async def test_explicit_ack_survives_a_failing_handler(start_daemon):
    d = await start_daemon(consumers=FAST.replace("max_retries = 2", "max_retries = 1"))
    await d.post(
        "/send-batch",
        {
            "messages": [
                {"body": {"ack": True, "fail": True, "n": 1}},
                {"body": {"fail": True, "n": 2}},
            ]
        },
    )
    await eventually(lambda: d.records("jobs-dlq"), timeout=15)
    jobs = d.records("jobs")
    assert [r["attempts"] for r in jobs if r["body"]["n"] == 1] == [1]
    assert [r["attempts"] for r in jobs if r["body"]["n"] == 2] == [1, 2]


async def test_retry_with_delay_waits_at_least_that_long(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"retry": 1, "n": 1})
    rows = await eventually(lambda: len(d.records("jobs")) >= 2 and d.records("jobs"), timeout=15)
    assert rows[1]["attempts"] == 2


async def test_delayed_send_is_not_delivered_early(start_daemon):
    d = await start_daemon(consumers=FAST)
    sent = dt.datetime.now(dt.UTC)
    await d.send({"n": "late"}, delaySeconds=1)
    await d.send({"n": "now"})
    rows = await eventually(lambda: len(d.records("jobs")) == 2 and d.records("jobs"), timeout=10)
    assert [r["body"]["n"] for r in rows] == ["now", "late"]
    late = next(r for r in rows if r["body"]["n"] == "late")
    assert dt.datetime.fromisoformat(late["ts"]) >= sent - dt.timedelta(milliseconds=5)


async def test_queue_delivery_delay_applies_and_explicit_zero_overrides(start_daemon):
    queues = '[[queues]]\nname = "jobs"\ndelivery_delay = 3600\n'
    d = await start_daemon(consumers=FAST, queues=queues)
    await d.send({"n": "default-delayed"})
    await d.send({"n": "zero"}, delaySeconds=0)
    rows = await eventually(lambda: d.records("jobs"))
    assert [r["body"]["n"] for r in rows] == ["zero"]

    async def one_left() -> bool:  # once the delivered one's ack is committed
        return (await d.metrics())["backlogCount"] == 1

    await eventually(one_left)  # the delayed one waits, stored
    assert [r["body"]["n"] for r in d.records("jobs")] == ["zero"]


async def test_paused_queue_stores_but_does_not_deliver(start_daemon):
    consumers = (
        FAST
        + """
[[workers.queues.consumers]]
queue = "held"
max_batch_timeout = 0
"""
    )
    producers = '[[workers.queues.producers]]\nbinding = "HELD"\nqueue = "held"\n'
    queues = '[[queues]]\nname = "held"\ndelivery_paused = true\n'
    d = await start_daemon(consumers=consumers, queues=queues, producers=producers)
    await d.post("/send", {"body": {"n": 1}, "binding": "HELD"})
    await d.send({"n": 2})
    await eventually(lambda: d.records("jobs"))
    assert d.records("held") == []
    assert (await d.metrics("HELD"))["backlogCount"] == 1


async def test_wait_until_failure_fails_the_batch(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"wait_until_fail": True})
    rows = await eventually(lambda: len(d.records("jobs")) >= 2 and d.records("jobs"), timeout=10)
    assert [r["attempts"] for r in rows[:2]] == [1, 2]


async def test_handler_over_its_wall_clock_limit_is_a_failed_attempt(start_daemon):
    d = await start_daemon(
        consumers=FAST.replace("max_retries = 2", "max_retries = 0"),
        worker_extra="handler_timeout = 1",
    )
    await d.send({"hang": True})
    dlq = await eventually(lambda: d.records("jobs-dlq"), timeout=10)
    assert dlq[0]["attempts"] == 1
    assert [r["attempts"] for r in d.records("jobs")] == [1]


async def test_batches_respect_max_batch_size(start_daemon):
    d = await start_daemon(consumers=FAST.replace("max_batch_size = 10", "max_batch_size = 3"))
    await d.post("/send-batch", {"messages": [{"body": i} for i in range(7)]})
    rows = await eventually(lambda: len(d.records("jobs")) == 7 and d.records("jobs"))
    assert max(r["batch"] for r in rows) == 3


async def test_batch_waits_for_timeout_when_not_full(start_daemon):
    consumers = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 5
max_batch_timeout = 1
"""
    d = await start_daemon(consumers=consumers)
    t0 = asyncio.get_running_loop().time()
    await d.post("/send-batch", {"messages": [{"body": 1}, {"body": 2}]})
    rows = await eventually(lambda: len(d.records("jobs")) == 2 and d.records("jobs"))
    assert asyncio.get_running_loop().time() - t0 >= 0.9
    assert {r["batch"] for r in rows} == {2}
    t1 = asyncio.get_running_loop().time()
    await d.post("/send-batch", {"messages": [{"body": i} for i in range(5)]})
    await eventually(lambda: len(d.records("jobs")) == 7)
    assert asyncio.get_running_loop().time() - t1 < 0.9  # a full batch does not wait


async def test_max_concurrency_bounds_batches_in_flight(start_daemon):
    consumers = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 1
max_batch_timeout = 0
max_concurrency = 2
"""
    d = await start_daemon(consumers=consumers)
    mod = d.module
    mod.GATE = asyncio.Event()
    await d.post("/send-batch", {"messages": [{"body": {"gate": True, "n": i}} for i in range(4)]})
    await eventually(lambda: mod.INFLIGHT == 2)
    assert len(d.records("jobs")) == 2
    mod.GATE.set()
    await eventually(lambda: len(d.records("jobs")) == 4)
    assert mod.MAX_INFLIGHT == 2


async def test_shutdown_returns_unfinished_batches_without_spending_an_attempt(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"hang": True, "n": 1})
    await eventually(lambda: d.records("jobs"))
    await d.daemon.shutdown(timeout_s=0.1)
    d2 = await start_daemon(consumers=FAST)
    rows = await eventually(lambda: len(d2.records("jobs")) == 2 and d2.records("jobs"))
    assert [r["attempts"] for r in rows] == [1, 1]


async def test_retention_deletes_expired_messages_even_while_paused(start_daemon):
    clock = FakeClock()
    queues = '[[queues]]\nname = "jobs"\ndelivery_paused = true\nmessage_retention_period = 60\n'
    d = await start_daemon(consumers=FAST, queues=queues, clock=clock)
    await d.send({"n": 1})
    clock.advance(30)
    await d.send({"n": 2})
    clock.advance(31)  # the first is 61 s old, the second 31 s
    await eventually(lambda: _count_is(d, 1), timeout=5)
    assert d.records() == []


async def _count_is(d, n):
    return (await d.metrics())["backlogCount"] == n


async def test_queue_without_consumer_keeps_messages(start_daemon):
    d = await start_daemon()
    await d.post("/send-batch", {"messages": [{"body": i} for i in range(5)]})
    assert (await d.metrics())["backlogCount"] == 5
    await d.daemon.shutdown()
    d2 = await start_daemon()
    assert (await d2.metrics())["backlogCount"] == 5


async def test_a_held_back_batch_waits_without_spinning(start_daemon):
    # Autoscaling holds a partial batch back while another is in flight. The dispatcher must
    # then wait for the batch to finish, not re-read the queue in a loop.
    consumers = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 5
max_batch_timeout = 0
"""
    d = await start_daemon(consumers=consumers)
    mod = d.module
    mod.GATE = asyncio.Event()
    await d.post("/send-batch", {"messages": [{"body": {"gate": True, "n": i}} for i in range(5)]})
    await eventually(lambda: mod.INFLIGHT == 1)
    await d.send({"n": "held"})  # one ready message: not a full batch
    store = d.daemon.store
    calls = 0
    real_ready = store.ready

    async def counting_ready(*args, **kwargs):
        nonlocal calls
        calls += 1
        return await real_ready(*args, **kwargs)

    store.ready = counting_ready
    for _ in range(50):  # plenty of event-loop turns and I/O
        assert (await d.metrics())["backlogCount"] == 6
    assert calls <= 2, f"the dispatcher polled the queue {calls} times while held back"
    mod.GATE.set()
    await eventually(lambda: len(d.records("jobs")) == 6)


async def test_a_failed_batch_is_remembered_with_its_error_class_and_message(start_daemon):
    d = await start_daemon(consumers=FAST)
    await d.send({"fail": True, "n": 1})
    [dispatcher] = [x for (_, q), x in d.daemon.dispatchers.items() if q == "jobs"]

    def failed() -> dict | None:
        last = dispatcher.last_outcome
        return last if last and last["outcome"] == "exception" else None

    last = await eventually(failed)
    # and where it was raised, in the worker's own file
    assert re.fullmatch(
        r"RuntimeError: the message asked the handler to fail "
        r"\(at .*recorder\.py:\d+ in _consume\)",
        last["error"],
    ), last["error"]
    assert last["size"] == 1 and last["duration_ms"] >= 0


async def test_a_backlog_of_full_batches_is_claimed_after_one_look(start_daemon):
    """One look at a standard queue counts the full batches it could start; the claims
    after the first go without another look (each look is a database round trip)."""
    consumers = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = 10
max_batch_timeout = 5
"""
    d = await start_daemon(consumers=consumers)
    store = d.daemon.store
    seen: list[int] = []
    look = store.ready

    async def counted(queue, now_ms, limit):
        ready = await look(queue, now_ms, limit)
        seen.append(ready.count)
        return ready

    store.ready = counted
    await d.post("/send-batch", {"messages": [{"body": i} for i in range(30)]})
    rows = await eventually(lambda: len(d.records("jobs")) == 30 and d.records("jobs"))
    assert {r["batch"] for r in rows} == {10}  # three full batches, none waited for
    assert [n for n in seen if n] == [30]
