"""JavaScript and TypeScript workers in workerd, on ocd's queues: an in-process daemon on
127.0.0.1 running the TypeScript worker ``tests/apps/js_worker`` (bundled by esbuild, run by
the pinned npm workerd) beside the Python recorder worker, on the backend under test."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from ocd.store import NewMessage
from tests.helpers import eventually
from tests.integration.rest import Rest
from tests.js import JS_APP, js_section

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("workerd_tools")]
APPS = Path(__file__).resolve().parent.parent / "apps"


class JsApp:
    def __init__(self, daemon: Daemon, tmp: Path, session: aiohttp.ClientSession) -> None:
        self.daemon = daemon
        self.tmp = tmp
        self.session = session
        self.base = f"http://127.0.0.1:{daemon.port}"

    def records(self, queue: str) -> list[dict[str, Any]]:
        path = self.tmp / "record.jsonl"
        if not path.exists():
            return []
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return [r for r in rows if r["queue"] == queue]

    def echoes(self) -> list[dict[str, Any]]:
        """What the JS consumer echoed of the messages it got: not what its cron echoes
        (the worker's "*/5 * * * *" fires for real whenever a test spans a fifth minute)."""
        return [r for r in self.records("echo") if r["body"].get("from") != "cron"]

    async def js_send(self, path: str = "/js/send", **spec: Any) -> Any:
        async with self.session.post(self.base + path, json=spec) as r:
            return r.status, await r.json()

    async def py_send(self, body: Any = None, **spec: Any) -> Any:
        async with self.session.post(self.base + "/send", json={"body": body, **spec}) as r:
            out = await r.json()
            assert r.status == 200, out
            return out

    async def backlog(self, queue: str) -> int:
        store = self.daemon.store
        return (await store.backlog(store.queue(queue))).count


CONFIG = """
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{store}
{js}

[[workers]]
name = "jsapp"
main = "{main}"
compatibility_date = "2026-11-01"
routes = ["/js"]
crons = ["*/5 * * * *", "0 0 1 1 *"]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-py"

[[workers.queues.producers]]
binding = "ECHO"
queue = "echo"

[[workers.queues.producers]]
binding = "ORDERS"
queue = "orders.fifo"

[[workers.queues.producers]]
binding = "PULLED"
queue = "pulled"

[[workers.queues.consumers]]
queue = "js-orders.fifo"
max_batch_size = 10
max_batch_timeout = 0

[[workers.queues.consumers]]
queue = "to-js"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 2
dead_letter_queue = "to-js-dlq"

[[workers]]
name = "app"
main = "{recorder}"
routes = ["/"]
vars = {{ RECORD = "{record}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-js"

[[workers.queues.producers]]
binding = "FIFO"
queue = "js-orders.fifo"

[[workers.queues.consumers]]
queue = "to-py"
max_batch_timeout = 0

[[workers.queues.consumers]]
queue = "echo"
max_batch_timeout = 0

[[queues]]
name = "to-js-dlq"
"""


@pytest.fixture
async def js_app(tmp_path, store_section):
    async for app in _js_app(tmp_path, store_section, JS_APP):
        yield app


@pytest.fixture
async def js_app_copy(tmp_path, store_section):
    """The app from a copy of the worker's sources, which the test may change."""
    src = tmp_path / "js_worker"
    shutil.copytree(JS_APP, src)
    async for app in _js_app(tmp_path, store_section, src):
        yield app


async def _js_app(tmp_path: Path, store_section: str, app: Path) -> AsyncIterator[JsApp]:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        CONFIG.format(
            store=store_section,
            js=js_section(),
            main=app / "src" / "index.ts",
            recorder=APPS / "recorder.py",
            record=tmp_path / "record.jsonl",
        )
    )
    config = load_config(cfg)
    daemon = Daemon(config, load_workers(config))
    await daemon.start()
    session = aiohttp.ClientSession()
    try:
        yield JsApp(daemon, tmp_path, session)
    finally:
        await session.close()
        await daemon.shutdown(timeout_s=2)


async def test_a_js_fetch_route_answers_through_ocds_listener(js_app):
    async with js_app.session.get(js_app.base + "/js/hello?x=1") as r:
        assert r.status == 200
        assert await r.text() == "hello from GET /js/hello"
        assert r.headers["X-Worker"] == "js"


async def test_a_js_producer_reaches_a_python_consumer_in_each_content_type(js_app):
    sent = [
        {"body": {"hello": "world", "n": [1, 2.5, None]}},
        {"body": "plain text", "contentType": "text"},
        {"b64": base64.b64encode(b"\x00\xffraw").decode(), "contentType": "bytes"},
        {"body": {"explicit": True}, "contentType": "json"},
    ]
    for spec in sent:
        status, out = await js_app.js_send(**spec)
        assert status == 200 and out["ok"], out
        metrics = out["result"]["metadata"]["metrics"]
        assert metrics["backlogCount"] >= 1  # the reply workerd needs, passed to the Worker
    rows = await eventually(lambda: len(js_app.records("to-py")) == 4 and js_app.records("to-py"))
    by_type: dict[str, list[Any]] = {}
    for r in rows:
        by_type.setdefault(r["type"], []).append(r["body"])
        assert r["attempts"] == 1
    assert sorted(map(json.dumps, by_type["dict"])) == sorted(
        [json.dumps({"hello": "world", "n": [1, 2.5, None]}), json.dumps({"explicit": True})]
    )
    assert by_type["str"] == ["plain text"]
    assert base64.b64decode(by_type["bytes"][0]["b64"]) == b"\x00\xffraw"


async def test_a_python_producer_reaches_a_js_consumer_in_each_content_type(js_app):
    await js_app.py_send({"k": "v", "noEcho": False})
    await js_app.py_send("some text", contentType="text")
    await js_app.py_send(b64=base64.b64encode(b"\x01\x02").decode(), contentType="bytes")
    rows = await eventually(lambda: len(js_app.echoes()) == 3 and js_app.echoes())
    seen = {r["body"]["type"]: r["body"]["body"] for r in rows}
    assert seen["object"] == {"k": "v", "noEcho": False}
    assert seen["string"] == "some text"
    assert base64.b64decode(seen["Uint8Array"]["b64"]) == b"\x01\x02"


async def test_js_consumer_ack_retry_and_dead_letter_follow_the_rules(js_app):
    # retried every time: delivered max_retries + 1 times, then dead-lettered
    await js_app.py_send({"retry": 0})
    # an explicit ack() survives the handler throwing afterwards
    await js_app.py_send({"ack": True, "fail": True})

    def retried() -> list[int]:
        echoes = js_app.echoes()
        return sorted(r["body"]["attempts"] for r in echoes if r["body"]["body"] == {"retry": 0})

    # the echo queue is consumed on its own, so its third record can land
    # after the dead-letter move: wait for all three, not just the backlogs
    async def settled() -> bool:
        return (
            await js_app.backlog("to-js") == 0
            and await js_app.backlog("to-js-dlq") == 1
            and len(retried()) >= 3
        )

    await eventually(settled, 30)
    echoes = js_app.echoes()
    assert retried() == [1, 2, 3]
    acked = [r for r in echoes if r["body"]["body"] == {"ack": True, "fail": True}]
    assert [r["body"]["attempts"] for r in acked][:1] == [1]
    assert all(r["body"]["attempts"] == 1 for r in acked)


async def test_retry_all_wins_over_the_handlers_success(js_app):
    await js_app.py_send({"retryAll": 0, "ackAll": False, "noEcho": False})

    def twice() -> bool:
        return len(js_app.echoes()) >= 2

    await eventually(twice, 30)
    attempts = [r["body"]["attempts"] for r in js_app.echoes()]
    assert attempts[:2] == [1, 2]


async def test_js_send_refusals_reject_in_the_worker_with_cloudflares_codes(js_app):
    status, out = await js_app.js_send(body={"x": 1}, delaySeconds=86_401)
    assert status == 400 and not out["ok"]
    assert "(10203)" in out["error"], out  # refused by ocd, cause and code as Cloudflare's
    status, out = await js_app.js_send(body="x" * 128_001, contentType="text")
    assert status == 400 and "(10204)" in out["error"], out
    assert await js_app.backlog("to-py") == 0  # nothing stored


async def test_js_metrics_are_the_queues(js_app):
    await js_app.daemon.dispatchers[("local", "to-py")].drain(0)  # keep what is sent
    for i in range(3):
        await js_app.js_send(body={"i": i})
    async with js_app.session.post(js_app.base + "/js/metrics", json={}) as r:
        out = await r.json()
    assert out["ok"] and out["result"]["backlogCount"] == 3


async def test_console_lines_reach_ocds_log_tagged_with_the_worker(js_app, caplog):
    caplog.set_level(logging.INFO)
    await js_app.py_send({"logged": True})

    def logged() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if getattr(r, "event", None) == "worker_log" and '"logged":true' in r.getMessage()
        ]

    lines = await eventually(logged, 30)
    assert lines[0].worker == "jsapp"
    assert lines[0].getMessage().startswith("worker jsapp: {")


async def test_a_js_cron_runs_scheduled_through_the_bridge(js_app):
    url = js_app.base + "/__ocd/scheduled?worker=jsapp&cron=*/5+*+*+*+*"
    async with js_app.session.post(url) as r:
        out = await r.json()
        assert r.status == 200, out
    assert [(x["worker"], x["outcome"]) for x in out["ran"]] == [("jsapp", "ok")]
    rows = await eventually(lambda: js_app.records("echo"), 30)
    assert rows[0]["body"] == {
        "from": "cron",
        "cron": "*/5 * * * *",
        "time": out["ran"][0]["scheduledTime"],
    }
    # a scheduled() that throws is a failed run, said as such
    async with js_app.session.post(
        js_app.base + "/__ocd/scheduled?worker=jsapp&cron=0+0+1+1+*"
    ) as r:
        out = await r.json()
    assert [x["outcome"] for x in out["ran"]] == ["exception"]


async def test_a_js_producer_cannot_send_to_a_fifo_queue_and_is_told_why(js_app):
    status, out = await js_app.js_send(binding="ORDERS", body={"x": 1})
    assert status == 400 and not out["ok"]
    assert "messageGroupId is required on the FIFO queue orders.fifo" in out["error"], out
    assert await js_app.backlog("orders.fifo") == 0


async def test_a_js_consumer_of_a_fifo_queue_gets_each_group_in_order(js_app):
    async with js_app.session.post(
        js_app.base + "/send-batch",
        json={
            "binding": "FIFO",
            "messages": [
                {"body": {"g": g, "i": i}, "messageGroupId": g, "messageDeduplicationId": f"{g}{i}"}
                for i in range(5)
                for g in "ab"
            ],
        },
    ) as r:
        assert r.status == 200, await r.text()
    rows = await eventually(lambda: len(js_app.echoes()) == 10 and js_app.echoes())
    for g in "ab":
        assert [r["body"]["body"]["i"] for r in rows if r["body"]["body"]["g"] == g] == list(
            range(5)
        )


async def test_a_reload_rebundles_and_switches_workerd_without_losing_or_repeating(js_app_copy):
    app = js_app_copy
    old_host = app.daemon.js
    # a batch in flight on the old workerd across the switch
    await app.py_send({"sleepFirst": 1500, "tag": "across"})
    await eventually(lambda: app.daemon.dispatchers[("local", "to-js")].inflight == 1)
    index = app.tmp / "js_worker" / "src" / "index.ts"
    index.write_text(index.read_text().replace("hello from", "hello again from"))
    assert await app.daemon.reload()
    assert app.daemon.js is not old_host
    async with app.session.get(app.base + "/js/x") as r:
        assert await r.text() == "hello again from GET /js/x"
    await app.py_send({"tag": "after"})
    rows = await eventually(lambda: len(app.echoes()) >= 2 and app.echoes(), 30)
    tags = sorted((r["body"]["body"]["tag"], r["body"]["attempts"]) for r in rows)
    assert tags == [("across", 1), ("after", 1)]  # once each: nothing lost, nothing repeated
    await eventually(lambda: not old_host.up, 30)  # the old workerd stops once it is done
    # nothing changed: the running workerd stays
    assert await app.daemon.reload()
    assert app.daemon.js is not None and app.daemon.js.up


async def test_a_reload_with_a_broken_js_worker_keeps_the_running_one(js_app_copy):
    app = js_app_copy
    running = app.daemon.js
    index = app.tmp / "js_worker" / "src" / "index.ts"
    index.write_text("export default {\n  async fetch( {\n")
    assert not await app.daemon.reload()
    assert app.daemon.js is running and running is not None and running.up
    assert "esbuild could not bundle it" in app.daemon.last_reload["error"]
    async with app.session.get(app.base + "/js/x") as r:
        assert await r.text() == "hello from GET /js/x"


async def test_v8_bodies_from_js_read_in_python(js_app):
    status, out = await js_app.js_send(v8Sample=True, contentType="v8")
    assert status == 200 and out["ok"], out
    rows = await eventually(lambda: js_app.records("to-py"), 30)
    assert rows[0]["type"] == "dict"
    assert rows[0]["v8_js"] == {
        "when": "2026-01-02T03:04:05+00:00",  # a Date: an aware UTC datetime
        "big": True,  # a BigInt: an int
        "set": True,  # a Set: a set
        "map": True,  # a Map: a dict
        "nested": True,  # objects, arrays, null
    }


async def test_v8_bodies_from_python_read_in_js(js_app):
    await js_app.py_send(v8_sample=True, contentType="v8")
    rows = await eventually(lambda: js_app.echoes(), 30)
    seen = rows[0]["body"]
    assert seen["type"] == "Map"  # a dict with a key that is not a str
    body = seen["body"]
    assert body["when"] == "2026-01-02T03:04:05.000Z"  # a Date
    assert body["big"] == str(2**70)  # a BigInt
    assert base64.b64decode(body["raw"]["b64"]) == b"\x00\x01"  # a Uint8Array
    assert sorted(body["1"]) == ["a", "b"]  # a Set
    assert body["a"] == body["b"] == {"k": [1, 2]}


async def test_undecodable_bodies_for_a_js_consumer_are_dead_lettered_alone(js_app, caplog):
    """Bodies workerd's bridge cannot decode (bad JSON, text that is not UTF-8) and a v8
    body V8 would refuse are each dead-lettered at once; the rest of the batch is
    delivered once."""
    caplog.set_level(logging.INFO)
    now = int(time.time() * 1000)

    def message(body: bytes, ctype: str) -> NewMessage:
        return NewMessage(uuid.uuid4().hex, ctype, body, now, now)

    bad = [
        message(b'{"cut": ', "json"),
        message(b"\xff\xfe not utf-8", "text"),
        message(b"\xff\x0f\x99garbage", "v8"),
    ]
    good = [message(f'{{"n": {i}}}'.encode(), "json") for i in range(3)]
    store = js_app.daemon.store
    await store.enqueue(store.queue("to-js"), [good[0], bad[0], good[1], bad[1], bad[2], good[2]])

    async def settled() -> bool:
        return await js_app.backlog("to-js") == 0 and await js_app.backlog("to-js-dlq") == 3

    await eventually(settled, 30)
    rows = await eventually(lambda: len(js_app.echoes()) == 3 and js_app.echoes())
    assert sorted(r["body"]["body"]["n"] for r in rows) == [0, 1, 2]
    assert all(r["body"]["attempts"] == 1 for r in rows)
    found = {
        r.id: r.reason for r in caplog.records if getattr(r, "event", None) == "message_undecodable"
    }
    assert set(found) == {m.id for m in bad}
    assert "SyntaxError" in found[bad[0].id]  # said by the bridge, in V8's words
    assert "TypeError" in found[bad[1].id]
    assert "v8 body" in found[bad[2].id]  # checked by ocd before V8 sees it


async def test_a_js_fetch_route_passes_method_headers_body_and_status(js_app):
    url = js_app.base + "/js/echo?x=1&y=%20z"
    async with js_app.session.post(url, data=b"payload") as r:
        assert r.status == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    headers = {"Authorization": "Bearer let-me-in", "X-Agent": "tests"}
    async with js_app.session.put(url, data=b"payload", headers=headers) as r:
        assert r.status == 201 and r.headers["X-Echo"] == "yes"
        assert await r.json() == {
            "method": "PUT",
            "body": "payload",
            "query": "?x=1&y=%20z",
            "agent": "tests",
        }


async def test_rest_and_js_share_queues_both_ways(js_app):
    rest = Rest(js_app, token=None)
    # the REST API pushes to a JS consumer
    await rest.ok("POST", "/queues/to-js/messages", {"body": {"via": "rest"}})
    rows = await eventually(lambda: js_app.echoes(), 30)
    assert rows[0]["body"]["body"] == {"via": "rest"} and rows[0]["body"]["type"] == "object"
    # a JS producer's message is pulled over the REST API
    await rest.ok("POST", "/queues/pulled/consumers", {"type": "http_pull"})
    status, out = await js_app.js_send(binding="PULLED", body={"via": "js"})
    assert status == 200, out
    pulled = await rest.ok("POST", "/queues/pulled/messages/pull", {"batch_size": 10})
    [m] = pulled["messages"]
    assert m["metadata"]["CF-Content-Type"] == "json"
    assert json.loads(base64.b64decode(m["body"])) == {"via": "js"}


async def test_a_js_send_delay_holds_the_message(js_app):
    store = js_app.daemon.store
    status, out = await js_app.js_send(body={"later": True}, delaySeconds=30)
    assert status == 200, out
    peeked = await store.peek(store.queue("to-py"), js_app.daemon.clock(), 10)
    assert peeked == []  # not ready: delayed
    assert await js_app.backlog("to-py") == 1
    # ready once the delay has passed
    later = await store.peek(store.queue("to-py"), js_app.daemon.clock() + 31_000, 10)
    assert [json.loads(m.body) for m in later] == [{"later": True}]


async def test_ocd_status_names_js_workers_and_workerds_state(js_app):
    async with js_app.session.get(js_app.base + "/__ocd/status") as r:
        report = await r.json()
    assert set(report["workers"]) == {"jsapp", "app"}
    assert report["workerd"] == "up"
    consumers = {c["queue"]: c["worker"] for c in report["consumers"]}
    assert consumers["to-js"] == "jsapp"
