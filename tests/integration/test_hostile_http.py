"""Hostile and broken connections against an in-process daemon, over raw sockets on
127.0.0.1: gzip bombs, unknown encodings, broken bodies, odd paths, slow and half-open
connections, the connection cap, and clients that vanish mid-body."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib
from pathlib import Path
from typing import Any

import pytest

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers
from tests.integration.rest import sha256_hex
from tests.openapi_schemas import problems, response_validator

APPS = Path(__file__).resolve().parent.parent / "apps"
TOKEN = "hostile-token"
GIB = 1 << 30


def gzip_bomb(inflated: int = GIB) -> bytes:
    """About 1 MB of gzip (1 MiB members of zeros, one after another) that inflates to
    ``inflated`` bytes."""
    member = gzip.compress(bytes(1 << 20), compresslevel=9)
    return member * (inflated >> 20)


@pytest.fixture
async def daemon(tmp_path, store_section):
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 2
header_timeout = 1
body_timeout = 2
keepalive_timeout = 2
max_connections = 16

[sqs]
listen = "127.0.0.1:0"

{store_section}

[[accounts]]
id = "local"
token_sha256 = ["{sha256_hex(TOKEN)}"]

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{tmp_path / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"
"""
    )
    config = load_config(cfg)
    d = Daemon(config, load_workers(config))
    await d.start()
    yield d
    await d.shutdown(timeout_s=1)


class Conn:
    """One raw HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
        async with asyncio.timeout(timeout):
            status_line = await self.reader.readline()
            assert status_line, "the connection closed without a response"
            status = int(status_line.split()[1])
            headers: dict[str, str] = {}
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", "0"))
            body = await self.reader.readexactly(n)
        return status, headers, body

    async def closed_by_server(self, timeout: float = 10) -> bool:
        async with asyncio.timeout(timeout):
            while await self.reader.read(65536):
                pass
        return True

    def close(self) -> None:
        self.writer.close()


def head(
    method: str, path: str, headers: dict[str, str] | None = None, length: int | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


PUSH = "/client/v4/accounts/local/queues/jobs/messages"
PUSH_OP = "/accounts/{account_id}/queues/{queue_id}/messages"


def documented(status: int, body: bytes, template: str = PUSH_OP, method: str = "POST") -> None:
    """``body`` is the response the OpenAPI document gives for ``status`` there."""
    validator = response_validator(method, template, status)
    assert validator is not None, f"the document lists no {status} for {method} {template}"
    assert problems(validator, json.loads(body)) == [], body


AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


async def healthz(port: int) -> int:
    c = await Conn.open(port)
    try:
        await c.send(head("GET", "/__ocd/healthz"))
        return (await c.response())[0]
    finally:
        c.close()


async def test_gzip_bomb_is_refused_413_before_it_is_sent_whole_and_others_are_served(daemon):
    bomb = gzip_bomb()
    c = await Conn.open(daemon.port)
    gz = {**AUTH, "Content-Encoding": "gzip"}
    await c.send(head("POST", PUSH, gz, len(bomb)) + bomb[:65536])
    # The daemon answers from the first 64 KiB: it inflated at most the limit, not 1 GiB.
    # While the bomb's connection is still open, mid-body, other clients are served.
    status, headers, body = await c.response()
    assert await healthz(daemon.port) == 200
    assert status == 413
    assert headers["content-type"].startswith("application/json")
    out = json.loads(body)
    assert out["success"] is False and "inflates to more than 1 MiB" in out["errors"][0]["message"]
    documented(413, body)
    c.close()


async def test_tokenless_gzip_bomb_gets_403_without_its_body_being_read(daemon):
    bomb = gzip_bomb()
    c = await Conn.open(daemon.port)
    hdrs = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    await c.send(head("POST", PUSH, hdrs, len(bomb)))  # the head only: no body byte sent
    status, _, body = await c.response()
    assert status == 403 and json.loads(body)["errors"][0]["code"] == 10000
    c.close()


async def test_gzip_and_deflate_bodies_are_inflated(daemon):
    payload = json.dumps({"body": "squeezed"}).encode()
    for coding, data in (
        ("gzip", gzip.compress(payload)),
        ("deflate", zlib.compress(payload)),
        ("deflate", zlib.compress(payload, wbits=-15)),  # raw deflate, as some clients send
    ):
        c = await Conn.open(daemon.port)
        await c.send(head("POST", PUSH, {**AUTH, "Content-Encoding": coding}, len(data)) + data)
        status, _, body = await c.response()
        assert status == 200, body
        c.close()


@pytest.mark.parametrize("coding", ["br", "zstd", "compress, gzip"])
async def test_unknown_content_encoding_is_a_415_in_each_surfaces_shape(daemon, coding):
    data = b"\x00garbage"
    c = await Conn.open(daemon.port)
    await c.send(head("POST", PUSH, {**AUTH, "Content-Encoding": coding}, len(data)) + data)
    status, headers, body = await c.response()
    assert status == 415 and headers["content-type"].startswith("application/json")
    assert "is not supported" in json.loads(body)["errors"][0]["message"]
    documented(415, body)
    c.close()
    c = await Conn.open(daemon.sqs_port)
    sqs = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.ListQueues",
        "Content-Encoding": coding,
    }
    await c.send(head("POST", "/", sqs, len(data)) + data)
    status, headers, body = await c.response()
    assert status == 415 and "UnsupportedMediaType" in json.loads(body)["__type"]
    c.close()
    c = await Conn.open(daemon.port)  # a worker route: plain text, the worker's surface
    await c.send(head("POST", "/send", {"Content-Encoding": coding}, len(data)) + data)
    status, _, body = await c.response()
    assert status == 415 and b"not supported" in body
    c.close()


async def test_broken_gzip_on_a_worker_route_gets_a_400_not_a_dropped_connection(daemon):
    data = gzip.compress(b'{"body": 1}')[:-12] + b"\xff" * 12  # trailer and tail damaged
    c = await Conn.open(daemon.port)
    await c.send(head("POST", "/send", {"Content-Encoding": "gzip"}, len(data)) + data)
    status, _, body = await c.response()
    assert status == 400 and b"not valid gzip" in body
    c.close()
    c = await Conn.open(daemon.port)  # and on the API, in the envelope
    await c.send(head("POST", PUSH, {**AUTH, "Content-Encoding": "gzip"}, len(data)) + data)
    status, _, body = await c.response()
    assert status == 400 and "not valid gzip" in json.loads(body)["errors"][0]["message"]
    c.close()


async def test_a_newline_in_an_api_path_gets_the_json_envelope(daemon):
    for path in ("/client/v4/x%0Ay", "/client/v4/accounts/local/queues%0A"):
        c = await Conn.open(daemon.port)
        await c.send(head("GET", path, AUTH))
        status, headers, body = await c.response()
        assert status == 404 and headers["content-type"].startswith("application/json"), body
        assert json.loads(body)["errors"][0]["code"] == 7003
        c.close()


async def test_405_names_the_allowed_methods(daemon):
    c = await Conn.open(daemon.port)
    await c.send(head("PUT", "/client/v4/accounts/local/queues", AUTH, 0))
    status, headers, body = await c.response()
    assert status == 405 and json.loads(body)["errors"][0]["code"] == 7001
    assert set(headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "POST"}
    c.close()
    c = await Conn.open(daemon.sqs_port)
    await c.send(head("PUT", "/"))  # GET is the Query protocol's; PUT is nobody's
    status, headers, body = await c.response()
    assert status == 405 and "__type" in json.loads(body)
    assert set(headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    c.close()


async def test_a_malformed_request_gets_the_envelope(daemon):
    c = await Conn.open(daemon.port)
    await c.send(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    status, _, body = await c.response()
    assert status == 400 and json.loads(body)["success"] is False
    c.close()


async def test_a_client_gone_mid_body_is_one_short_log_line(daemon, caplog):
    caplog.set_level(logging.INFO)
    c = await Conn.open(daemon.port)
    await c.send(head("POST", PUSH, AUTH, 1000) + b'{"body": "')
    await asyncio.sleep(0)  # let the daemon start reading (what follows waits for its log)
    c.close()
    async with asyncio.timeout(10):
        while not [r for r in caplog.records if getattr(r, "event", "") == "client_gone"]:
            await asyncio.sleep(0.01)
    gone = [r for r in caplog.records if getattr(r, "event", "") == "client_gone"]
    assert len(gone) == 1 and gone[0].exc_info is None
    assert not [r for r in caplog.records if getattr(r, "event", "") == "api_failed"]
    assert not [r for r in caplog.records if r.exc_info]


async def test_half_open_and_slow_header_connections_are_closed_after_header_timeout(
    daemon, caplog
):
    caplog.set_level(logging.INFO)
    silent = await Conn.open(daemon.port)
    slow = await Conn.open(daemon.port)
    await slow.send(b"POST /client/v4/accounts/local/queues HTTP/1.1\r\nHost: x\r\n")
    assert await silent.closed_by_server() and await slow.closed_by_server()
    silent.close()
    slow.close()
    assert await healthz(daemon.port) == 200
    assert [r for r in caplog.records if getattr(r, "event", "") == "header_timeout"]


async def test_kept_alive_connections_close_when_idle_or_when_the_next_head_is_slow(daemon):
    idle = await Conn.open(daemon.port)
    slow = await Conn.open(daemon.port)
    for c in (idle, slow):
        await c.send(head("GET", "/__ocd/healthz"))
        assert (await c.response())[0] == 200
    await slow.send(b"GET /__ocd/healthz HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    assert await idle.closed_by_server() and await slow.closed_by_server()
    idle.close()
    slow.close()


async def test_a_body_slower_than_body_timeout_gets_408_in_the_envelope(daemon):
    c = await Conn.open(daemon.port)
    await c.send(head("POST", PUSH, AUTH, 100) + b'{"body": ')
    status, _, body = await c.response()
    assert status == 408 and "body_timeout" in json.loads(body)["errors"][0]["message"]
    documented(408, body)
    c.close()


async def test_at_the_connection_cap_idle_connections_make_room(daemon):
    idle = [await Conn.open(daemon.port) for _ in range(40)]  # the cap is 16
    try:
        for _ in range(3):
            assert await healthz(daemon.port) == 200
        closed = 0
        for c in idle:
            if c.reader.at_eof() or await _eof_soon(c):
                closed += 1
        assert closed >= 40 - 16  # the oldest made room for the newer ones
    finally:
        for c in idle:
            c.close()


async def _eof_soon(c: Conn) -> bool:
    try:
        async with asyncio.timeout(5):
            return await c.reader.read(1) == b""
    except TimeoutError:
        return False


async def test_beyond_the_cap_with_none_idle_a_503_in_the_envelope(daemon):
    busy: list[Conn] = []
    try:
        for _ in range(16):  # each one is inside a handler, reading a body that never comes
            c = await Conn.open(daemon.port)
            await c.send(head("POST", PUSH, AUTH, 100) + b"{")
            busy.append(c)
        await _until_busy(daemon, 16)
        c = await Conn.open(daemon.port)
        await c.send(head("GET", "/client/v4/accounts/local/queues", AUTH))
        status, headers, body = await c.response()
        assert status == 503 and headers["retry-after"] == "1"
        assert json.loads(body)["errors"][0]["code"] == 15002
        documented(503, body, "/accounts/{account_id}/queues", "GET")
        c.close()
    finally:
        for c in busy:
            c.close()


async def _until_busy(daemon: Any, n: int) -> None:
    gate = daemon.listeners.gate
    async with asyncio.timeout(10):
        while sum(1 for h in gate.open if not h.idle) < n:
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", ""])
async def test_a_malformed_sqs_request_gets_the_query_protocols_envelope(daemon, content_type):
    c = await Conn.open(daemon.sqs_port)
    typed = f"Content-Type: {content_type}\r\n" if content_type else ""
    # a header name with a space: aiohttp's parser refuses the head, so its headers (and
    # a JSON client's Content-Type) are unknown, and the Query protocol is the default
    await c.send(f"POST / HTTP/1.1\r\nHost: x\r\n{typed}Bad Header: 1\r\n\r\n".encode())
    status, headers, body = await c.response()
    assert status == 400, body
    assert headers["content-type"].startswith("text/xml"), body
    assert b"<ErrorResponse" in body and b"<Code>InvalidParameterValue</Code>" in body
    c.close()
