"""Operator endpoints: Prometheus metrics (parsed with the official client), health, ready."""

from __future__ import annotations

import logging

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import eventually
from tests.integration.rest import Rest

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
max_retries = 0
"""


async def scrape(d) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with d.session.get(d.base + "/__ocd/metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_count_what_happened(start_daemon):
    d = await start_daemon(consumers=CONSUMER)
    await d.post("/send-batch", {"messages": [{"body": {"n": i}} for i in range(3)]})
    await eventually(lambda: len(d.records("jobs")) == 3)  # not in one batch with the next
    await d.send({"fail": True})
    await d.send({"n": "later"}, delaySeconds=3600)
    jobs = {"account": "local", "queue": "jobs"}

    async def settled():
        s = await scrape(d)
        # The gauges are read from the store before the counters are rendered: one scrape
        # can see a batch in flight that its counters already count as settled.
        done = value(s, "ocd_messages_acked_total", **jobs) == 3
        done = done and value(s, "ocd_queue_inflight_messages", **jobs) == 0
        return done and value(s, "ocd_messages_dead_lettered_total", **jobs) == 1 and s

    s = await eventually(settled)
    assert value(s, "ocd_messages_sent_total", **jobs) == 5
    assert value(s, "ocd_queue_backlog_messages", **jobs) == 1  # the delayed one
    assert value(s, "ocd_queue_delayed_messages", **jobs) == 1
    assert value(s, "ocd_queue_inflight_messages", **jobs) == 0
    assert value(s, "ocd_queue_oldest_message_age_seconds", **jobs) >= 0
    assert (
        value(s, "ocd_handler_failures_total", worker="app", queue="jobs", outcome="exception") == 1
    )
    assert value(s, "ocd_batch_duration_seconds_count", worker="app", queue="jobs") >= 2
    assert value(s, "ocd_send_commit_seconds_count") == 3  # one sendBatch + two sends
    commits = sum(
        value(s, "ocd_group_commit_operations_count", thread=t) for t in ("loop", "writer")
    )
    assert commits > 0
    assert value(s, "process_resident_memory_bytes") > 0


async def test_a_pull_consumer_dead_letters_are_logged_and_counted_as_a_push_consumers(
    start_daemon, caplog
):
    caplog.set_level(logging.INFO)
    d = await start_daemon()
    api = Rest(d)
    await api.create_queue("work")
    await api.pull_consumer("work", dlq="work-dlq", max_retries=0)
    await api.push("work", "retried", content_type="text")
    [m] = (await api.pull("work"))["messages"]
    await api.ack("work", retries=[{"lease_id": m["lease_id"], "delay_seconds": 0}])
    # a lease that lapses on the last attempt: the next pull dead-letters it
    await api.push("work", "lapsed", content_type="text")
    [lapsed] = (await api.pull("work", visibility_timeout_ms=50))["messages"]

    async def both_dead() -> bool:
        assert (await api.pull("work"))["messages"] == []
        return await api.backlog("work-dlq") == 2

    await eventually(both_dead, timeout=5)
    lines = [r for r in caplog.records if getattr(r, "event", "") == "message_dead_lettered"]
    assert sorted((r.id, r.queue, r.dead_letter_queue, r.attempts) for r in lines) == sorted(
        [(m["id"], "work", "work-dlq", 1), (lapsed["id"], "work", "work-dlq", 1)]
    )
    s = await scrape(d)
    work = {"account": "local", "queue": "work"}
    assert value(s, "ocd_messages_dead_lettered_total", **work) == 2
    assert value(s, "ocd_messages_retried_total", **work) == 0  # dead, not retried


async def test_health_and_ready(start_daemon):
    d = await start_daemon()
    async with d.session.get(d.base + "/__ocd/healthz") as r:
        assert r.status == 200 and (await r.json())["ok"] is True
    async with d.session.get(d.base + "/__ocd/readyz") as r:
        assert r.status == 200 and (await r.json())["state"] == "ready"
    d.daemon.state = "draining"  # what shutdown sets before it stops the listener
    async with d.session.get(d.base + "/__ocd/readyz") as r:
        assert r.status == 503
