"""HTTP/1.1 on workerd's private sockets (``ocd/js/wire.py``), over real unix sockets.

The bridge's client against aiohttp's server, as workerd's stand-in, and a scripted one for
the answers aiohttp never gives (a connection dropped before or during an answer, a body
ending with the connection). The producer socket's server against aiohttp's client and raw
bytes: what it cannot read is a 400 or 413, never a hang or a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from ocd.js.wire import Answer, Asked, BridgeWire, PrivateServer, Unreachable, routed

pytestmark = pytest.mark.timeout(30)

AUTH = b"Authorization: Bearer s\r\n"


@pytest.fixture
async def aiohttp_bridge(tmp_path):
    """An aiohttp server on a unix socket, and a client of it: POST /echo answers the body
    and the headers seen, with the id of the connection; /chunked answers in chunks; /close
    closes after."""
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
    wire = BridgeWire(path)
    yield wire, seen
    wire.close()
    await runner.cleanup()


async def test_answers_come_back_on_one_kept_connection(aiohttp_bridge):
    wire, seen = aiohttp_bridge
    for size in (0, 10, 200_000):  # a large body is written after its head
        status, body = await wire.post("/echo", AUTH, b"x" * size)
        assert status == 200
        assert body == b'{"len": %d, "auth": "Bearer s"}' % size
    assert len(seen) == 3 and len(set(seen)) == 1


async def test_a_chunked_answer_is_read_whole(aiohttp_bridge):
    wire, _ = aiohttp_bridge
    assert await wire.post("/chunked", AUTH, b"{}") == (200, b'{"outcome":"ok"}')
    assert (await wire.post("/echo", AUTH, b"{}"))[0] == 200  # and the connection kept


async def test_a_connection_the_server_closes_is_not_used_again(aiohttp_bridge):
    wire, seen = aiohttp_bridge
    assert await wire.post("/close", AUTH, b"") == (503, b"bye")
    assert (await wire.post("/echo", AUTH, b""))[0] == 200
    assert len(set(seen)) == 2


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


# ------------------------------------------------------------------------------- server


async def _echo(asked: Asked) -> Answer:
    n = asked.headers.get("x-n", "")
    said = f"{asked.method} {asked.path} {len(asked.body)} {n}"
    return Answer(200, said.encode(), "text/plain")


async def _broken(asked: Asked) -> Answer:
    raise RuntimeError("a bug")


@pytest.fixture
async def server(tmp_path):
    s = PrivateServer(
        str(tmp_path / "p.sock"),
        routed({("POST", "/echo"): _echo, ("GET", "/echo"): _echo, ("POST", "/bug"): _broken}),
        1000,
    )
    await s.start()
    yield s
    await s.close()


async def _raw(path: str, data: bytes) -> bytes:
    """``data`` written on a new connection; everything answered until the server closes."""
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_requests_on_one_kept_connection_are_answered_in_turn(server):
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=server.path)) as http:
        for n in range(3):
            async with http.post("http://p/echo?x=1", data=b"a" * n, headers={"X-N": str(n)}) as r:
                assert r.status == 200 and await r.read() == b"POST /echo %d %d" % (n, n)
        async with http.get("http://p/echo") as r:
            assert await r.read() == b"GET /echo 0 "
    absolute = b"GET http://producer/echo?x HTTP/1.1\r\nConnection: close\r\n\r\n"
    assert (await _raw(server.path, absolute)).endswith(b"GET /echo 0 ")


async def test_a_chunked_request_and_one_expecting_100_continue_are_read(server):
    chunked = (
        b"POST /echo HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\nConnection: close"
        b"\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
    )
    assert (await _raw(server.path, chunked)).endswith(b"POST /echo 5 ")
    expecting = (
        b"POST /echo HTTP/1.1\r\nHost: p\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\nhi"
    )
    got = await _raw(server.path, expecting)
    assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /echo HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", b"413"),
        (b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n", b"413"),
        (b"POST /echo HTTP/1.1\r\nContent-Length: many\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"400"),
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
        (b"POST /elsewhere HTTP/1.1\r\nConnection: close\r\n\r\n", b"404"),
        (b"DELETE /echo HTTP/1.1\r\nConnection: close\r\n\r\n", b"405"),
        (b"POST /echo HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", b"431"),
    ],
)
async def test_what_it_cannot_take_is_answered_and_the_connection_closed(
    server, request_bytes, status
):
    got = await _raw(server.path, request_bytes)
    assert got.startswith(b"HTTP/1.1 " + status + b" ")


async def test_a_handler_that_fails_is_a_500_and_the_server_goes_on(server, caplog):
    got = await _raw(
        server.path,
        b"POST /bug HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
        b"POST /echo HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    assert got.startswith(b"HTTP/1.1 500 ")
    assert got.endswith(b"POST /echo 0 ")  # the same connection, the next request
    assert "a request on" in caplog.text
