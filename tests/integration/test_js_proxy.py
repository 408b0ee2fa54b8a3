"""A JS worker's route gets the request as the client sent it (headers, target and body bytes,
nothing added, nothing inflated), and its answer streams back as it is written."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.test_js import _js_app
from tests.js import JS_APP

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("workerd_tools")]


@pytest.fixture
async def js_app(tmp_path, store_section):
    async for app in _js_app(tmp_path, store_section, JS_APP):
        yield app


async def raw_request(port: int, head: list[tuple[str, str]], target: str, body: bytes) -> Any:
    """One HTTP/1.1 request written by hand, so the test knows every header it sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"POST {target} HTTP/1.1", *(f"{k}: {v}" for k, v in head), "", ""]
    writer.write("\r\n".join(lines).encode() + body)
    await writer.drain()
    status = await reader.readline()
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    payload = await reader.readexactly(int(headers["content-length"]))
    writer.close()
    await writer.wait_closed()
    assert b" 200 " in status, (status, payload)
    return json.loads(payload)


async def test_the_worker_sees_exactly_the_headers_and_bytes_sent(js_app):
    body = gzip.compress(b"\x00\xff compressed, and passed on as it is " * 50)
    port = js_app.daemon.port
    head = [
        ("Host", f"127.0.0.1:{port}"),
        ("X-Custom", "a, b"),
        ("X-Twice", "1"),
        ("X-Twice", "2"),
        ("Content-Encoding", "gzip"),
        ("Content-Length", str(len(body))),
    ]
    seen = await raw_request(port, head, "/js/headers?q=%20x&r=1", body)
    assert seen["method"] == "POST"
    assert seen["url"] == f"http://127.0.0.1:{port}/js/headers?q=%20x&r=1"
    assert sorted(seen["headers"]) == sorted(
        [
            ["host", f"127.0.0.1:{port}"],
            ["x-custom", "a, b"],
            ["x-twice", "1, 2"],  # the Fetch API joins repeated headers
            ["content-encoding", "gzip"],
            ["content-length", str(len(body))],
        ]
    )  # no accept-encoding, content-type, user-agent or accept of ocd's making
    assert seen["length"] == len(body)
    assert seen["sha256"] == hashlib.sha256(body).hexdigest()  # not inflated on the way


async def test_a_large_request_body_streams_to_the_worker(js_app):
    chunk = os.urandom(256 * 1024)
    count = 24  # 6 MiB: more than ocd holds in memory for a request on its other routes

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(count):
            yield chunk

    async with js_app.session.post(js_app.base + "/js/headers", data=upload()) as r:
        assert r.status == 200, await r.text()
        seen = await r.json()
    assert seen["length"] == len(chunk) * count
    assert seen["sha256"] == hashlib.sha256(chunk * count).hexdigest()


async def test_a_route_answers_with_server_sent_events_as_they_are_written(js_app):
    # the second event is written only once released (or after 20 s): the answer and its
    # first event arrive well before that only if they are streamed, not buffered whole
    async with asyncio.timeout(10):
        r = await js_app.session.get(js_app.base + "/js/sse")
        first = await r.content.readuntil(b"\n\n")
    try:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/event-stream"
        assert first == b"event: tick\ndata: first\n\n"
        async with js_app.session.get(js_app.base + "/js/sse-release") as released:
            assert await released.text() == "released"
        rest = await asyncio.wait_for(r.content.read(), 15)
    finally:
        r.release()
    assert rest == b"event: tick\ndata: second\n\n"
