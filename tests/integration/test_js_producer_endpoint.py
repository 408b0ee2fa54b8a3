"""The producer socket workerd's queue bindings send to (``ocd/js/producer.py``), driven over
real HTTP on a unix socket with a real SQLite store: a batch lands whole, and a request it
cannot read is refused with workerd's status and cause, never a 500."""

from __future__ import annotations

import base64
import json

import aiohttp
import pytest

from ocd.js.producer import MAX_REQUEST_BYTES, ProducerEndpoint
from ocd.js.wire import PrivateServer, routed
from ocd.producer import MESSAGE_METADATA_INVALID, Producer
from ocd.store import Claim, DeadLetter, QueueSettings, make_store

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret"
HEADERS = {"Authorization": f"Bearer {SECRET}", "X-Ocd-Worker": "w", "X-Ocd-Binding": "Q"}


@pytest.fixture
async def endpoint(tmp_path):
    store = make_store("sqlite", data_dir=tmp_path)
    await store.open(1_700_000_000_000)
    q = await store.ensure_queue("jobs", "local", QueueSettings(), 1_700_000_000_000)
    endpoint = ProducerEndpoint(Producer(store), SECRET, {("w", "Q"): ("jobs", "local")})
    server = PrivateServer(str(tmp_path / "p.sock"), routed(endpoint.routes()), MAX_REQUEST_BYTES)
    await server.start()
    connector = aiohttp.UnixConnector(path=server.path)
    async with aiohttp.ClientSession("http://producer", connector=connector) as http:
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
    [
        b"{not json",
        b"[]",
        b'{"messages": []}',
        b'{"messages": [{"body": "%%%"}]}',
        b"\xff\xfe",
        '{"messages": [{"body": "e30=\u00e9"}]}'.encode(),  # not ASCII
        b'{"messages": [{"body": 5}]}',
        b'{"messages": [5]}',
        b'{"messages": [{"body": "e30=", "contentType": "xml"}]}',
        b'{"messages": [{"body": "e30=", "contentType": ["json"]}]}',
    ],
)
async def test_a_batch_it_cannot_read_is_refused_with_400_and_stores_nothing(endpoint, body):
    http, store, q = endpoint
    async with http.post("/batch", data=body, headers=HEADERS) as r:
        assert r.status == 400
        assert r.headers["CF-Queues-Error-Code"] == str(MESSAGE_METADATA_INVALID)
        cause = r.headers["CF-Queues-Error-Cause"]
        assert "invalid" in cause or "Unsupported queue message content type" in cause
    assert (await store.backlog(q)).count == 0


async def test_a_batch_is_stored_byte_for_byte_each_message_under_an_id_of_its_own(endpoint):
    http, store, q = endpoint
    bodies = [b"\x00\xffraw", json.dumps({"i": 1}).encode(), "h\u00e9".encode()]
    messages = [
        {"body": base64.b64encode(b).decode(), "contentType": ct}
        for b, ct in zip(bodies, ["bytes", "JSON", None], strict=True)
    ]
    async with http.post("/batch", json={"messages": messages}, headers=HEADERS) as r:
        assert r.status == 200
    now = 1_700_000_000_000 + 10**9
    claimed = await store.claim(q, Claim(10, now, now + 30_000, 5, DeadLetter(None)))
    got = sorted(claimed.deliveries, key=lambda d: d.seq)
    assert [d.body for d in got] == bodies
    assert [d.content_type for d in got] == ["bytes", "json", "v8"]
    ids = [d.id for d in got]
    assert len(set(ids)) == 3 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
