"""The bridge's HTTP/1.1 client (``ocd/js/wire.py``) against real servers on a unix socket:
aiohttp's, as workerd's stand-in, and a scripted one for the answers aiohttp never gives (a
connection dropped before or during an answer, a body ending with the connection)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from ocd.js.wire import BridgeWire, Unreachable

pytestmark = pytest.mark.timeout(30)

AUTH = b"Authorization: Bearer s\r\n"


@pytest.fixture
async def aiohttp_bridge(tmp_path):
    """An aiohttp server on a unix socket: POST /echo answers the body and the headers seen,
    with the id of the connection; /chunked answers in chunks; /close closes after."""
    path = str(tmp_path / "bridge.sock")
    seen: list[int] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(id(request.transport))
        body = await request.read()
        return web.json_response({"len": len(body), "auth": request.headers["Authorization"]})

    async def chunked(request: web.Request) -> web.StreamResponse:
        await request.read()
        r = web.StreamResponse()
        r.enable_chunked_encoding()
        await r.prepare(request)
        for part in (b'{"outcome":', b'"ok"}'):
            await r.write(part)
        await r.write_eof()
        return r

    async def close(request: web.Request) -> web.Response:
        seen.append(id(request.transport))
        await request.read()
        return web.Response(body=b"bye", status=503, headers={"Connection": "close"})

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_post("/chunked", chunked)
    app.router.add_post("/close", close)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, path).start()
    yield path, seen
    await runner.cleanup()


async def test_answers_come_back_on_one_kept_connection(aiohttp_bridge):
    path, seen = aiohttp_bridge
    wire = BridgeWire(path)
    try:
        for size in (0, 10, 200_000):  # a large body is written after its head
            status, body = await wire.post("/echo", AUTH, b"x" * size)
            assert status == 200
            assert body == b'{"len": %d, "auth": "Bearer s"}' % size
        assert len(seen) == 3 and len(set(seen)) == 1
    finally:
        wire.close()


async def test_a_chunked_answer_is_read_whole(aiohttp_bridge):
    path, _ = aiohttp_bridge
    wire = BridgeWire(path)
    try:
        assert await wire.post("/chunked", AUTH, b"{}") == (200, b'{"outcome":"ok"}')
        assert (await wire.post("/echo", AUTH, b"{}"))[0] == 200  # and the connection kept
    finally:
        wire.close()


async def test_a_connection_the_server_closes_is_not_used_again(aiohttp_bridge):
    path, seen = aiohttp_bridge
    wire = BridgeWire(path)
    try:
        assert await wire.post("/close", AUTH, b"") == (503, b"bye")
        assert (await wire.post("/echo", AUTH, b""))[0] == 200
        assert len(set(seen)) == 2
    finally:
        wire.close()


async def test_no_bridge_is_unreachable_and_nothing_was_sent(tmp_path):
    wire = BridgeWire(str(tmp_path / "nobody.sock"))
    with pytest.raises(Unreachable):
        await wire.post("/echo", AUTH, b"{}")


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _scripted(path: str, script: Script) -> asyncio.AbstractServer:
    """A unix server whose ``n``-th connection (from 0) runs ``script``."""
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        n, count = count, count + 1
        try:
            await script(reader, writer, n)
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, path)


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.startswith(b"Content-")
    )
    return await reader.readexactly(length)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


async def test_a_kept_connection_dropped_before_any_answer_is_tried_again_on_a_new_one(tmp_path):
    path = str(tmp_path / "s.sock")

    async def script(reader, writer, n):
        await _request(reader)
        writer.write(OK)
        if n == 0:
            await _request(reader)  # the next request on it: read, then the connection drops
            return
        while not reader.at_eof():  # answer everything on the new connection
            await _request(reader)
            writer.write(OK)

    server = await _scripted(path, script)
    wire = BridgeWire(path)
    try:
        assert await wire.post("/q", AUTH, b"a") == (200, b"{}")
        assert await wire.post("/q", AUTH, b"b") == (200, b"{}")
    finally:
        wire.close()
        server.close()


async def test_a_new_connection_dropped_before_any_answer_is_an_error(tmp_path):
    path = str(tmp_path / "s.sock")

    async def script(reader, writer, n):
        await _request(reader)

    server = await _scripted(path, script)
    wire = BridgeWire(path)
    try:
        with pytest.raises(EOFError):
            await wire.post("/q", AUTH, b"a")
    finally:
        wire.close()
        server.close()


async def test_an_answer_cut_short_is_an_error_and_one_ending_with_its_connection_is_whole(
    tmp_path,
):
    path = str(tmp_path / "s.sock")

    async def script(reader, writer, n):
        await _request(reader)
        if n == 0:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"y" * 100_000)

    server = await _scripted(path, script)
    wire = BridgeWire(path)
    try:
        with pytest.raises(EOFError):
            await wire.post("/q", AUTH, b"a")
        assert await wire.post("/q", AUTH, b"a") == (200, b"y" * 100_000)
    finally:
        wire.close()
        server.close()


async def test_a_cancelled_request_closes_its_connection(tmp_path):
    path = str(tmp_path / "s.sock")
    got = asyncio.Event()

    async def script(reader, writer, n):
        await _request(reader)
        if n == 0:
            got.set()
            await reader.read()  # never answers; ends when the client closes
            return
        writer.write(OK)

    server = await _scripted(path, script)
    wire = BridgeWire(path)
    try:
        post = asyncio.ensure_future(wire.post("/q", AUTH, b"a"))
        await asyncio.wait_for(got.wait(), 10)
        post.cancel()
        with pytest.raises(asyncio.CancelledError):
            await post
        assert await wire.post("/q", AUTH, b"b") == (200, b"{}")  # on a connection of its own
    finally:
        wire.close()
        server.close()
