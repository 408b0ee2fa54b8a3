"""The producer socket workerd's queue bindings send to (``ocd/js/producer.py``), driven over
real HTTP on 127.0.0.1 with a real SQLite store: a batch lands whole, and a request it
cannot read is refused with workerd's status and cause, never a 500."""

from __future__ import annotations

import base64
import json

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from ocd.js.producer import ProducerEndpoint
from ocd.producer import Producer
from ocd.store import QueueSettings, make_store

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret"
HEADERS = {"Authorization": f"Bearer {SECRET}", "X-Ocd-Worker": "w", "X-Ocd-Binding": "Q"}


@pytest.fixture
async def endpoint(tmp_path):
    store = make_store("sqlite", data_dir=tmp_path)
    await store.open(1_700_000_000_000)
    q = await store.ensure_queue("jobs", "local", QueueSettings(), 1_700_000_000_000)
    app = ProducerEndpoint(Producer(store), SECRET, {("w", "Q"): ("jobs", "local")}).app()
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession(str(server.make_url(""))) as http:
        yield http, store, q
    await server.close()
    await store.close()


async def test_a_batch_is_stored_whole_and_answered_with_the_backlog(endpoint):
    http, store, q = endpoint
    messages = [
        {"body": base64.b64encode(json.dumps({"i": i}).encode()).decode(), "contentType": "json"}
        for i in range(3)
    ]
    async with http.post("/batch", json={"messages": messages}, headers=HEADERS) as r:
        assert r.status == 200
        assert (await r.json())["metadata"]["metrics"]["backlogCount"] == 3
    assert (await store.backlog(q)).count == 3


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'{"messages": []}', b'{"messages": [{"body": "%%%"}]}', b"\xff\xfe"],
)
async def test_a_batch_it_cannot_read_is_refused_with_400_and_stores_nothing(endpoint, body):
    http, store, q = endpoint
    async with http.post("/batch", data=body, headers=HEADERS) as r:
        assert r.status == 400
        assert r.headers["CF-Queues-Error-Code"] and "invalid" in r.headers["CF-Queues-Error-Cause"]
    assert (await store.backlog(q)).count == 0
