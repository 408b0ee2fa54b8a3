"""HTTP/1.1 on workerd's private unix sockets: ocd's POSTs to the bridge Worker
(``BridgeWire``), and the server of the producer socket workerd's queue bindings post to
(``PrivateServer``).

Every claimed batch of a JS worker is one POST to the bridge. aiohttp's client spent about
200 µs of the event loop's CPU on each (its request and response objects, the connector,
timers), two microseconds a message of a batch of 100; this client writes the request in
one piece and reads the answer with a few ``StreamReader`` calls, about a quarter of that
(docs/performance.md). It speaks only what the bridge needs: one request at a time on a
connection, a response with ``Content-Length``, chunked, or ending at the connection's
close. Timeouts and cancellation are the caller's: a request that is cancelled, or fails
half way, closes its connection.

``Unreachable``: no connection could be made, so the request was never written (the
bridge's workerd is down or restarting). Any other error (``OSError``, ``EOFError``,
``ValueError``) came after the request may have been read.

The server side is the same idea: aiohttp's server spent about 120 µs of the loop's CPU on
each request, which every ``send()`` of a JS Worker pays and a ``sendBatch`` of 100 pays a
microsecond a message of; this one about 40. It serves one client it started itself
(workerd) on a socket in a 0700 directory: requests with a ``Content-Length`` or chunked
body, one at a time on a connection, kept alive; anything it cannot read is answered 400
and the connection closed, and a handler's own failure is a 500 that leaves the server
serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # bytes of a response's status line and headers
MAX_BODY = 16 * 1024 * 1024  # bytes of a response body
COPY_MOST = 64 * 1024  # a request body up to this size is copied after its head


class Unreachable(OSError):
    """The bridge's socket could not be connected to: nothing was sent."""


class BridgeWire:
    """Connections to one unix socket, each reused once its last response was read whole."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._closed = False

    async def post(self, target: str, headers: bytes, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` to ``target`` (a path) with ``headers`` (``Name: value\\r\\n``
        lines): the response's status and body."""
        head = (
            f"POST {target} HTTP/1.1\r\nHost: workerd\r\nContent-Length: {len(body)}\r\n".encode()
            + headers
            + b"\r\n"
        )
        while self._idle:
            reader, writer = self._idle.pop()
            if reader.at_eof() or writer.is_closing():
                writer.close()
                continue
            try:
                return await self._exchange(reader, writer, head, body)
            except _Dropped:
                # Closed by the server while idle, before any byte of an answer: the request
                # was not read. Another connection, as any HTTP client would.
                continue
        try:
            reader, writer = await asyncio.open_unix_connection(self._path, limit=MAX_HEAD)
        except OSError as e:
            raise Unreachable(e.errno, f"cannot connect to {self._path}: {e}") from e
        try:
            return await self._exchange(reader, writer, head, body)
        except _Dropped as e:
            raise EOFError("the bridge closed the connection without answering") from e

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: bytes,
        body: bytes,
    ) -> tuple[int, bytes]:
        keep = False
        try:
            if len(body) <= COPY_MOST:
                writer.write(head + body)  # one write, one system call
            else:
                writer.writelines((head, body))
            try:
                response = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                if not e.partial:
                    raise _Dropped from None
                raise
            status, length, chunked, keep = _head(response)
            if chunked:
                payload = await _chunks(reader)
            elif length is not None:
                if length > MAX_BODY:
                    raise ValueError(f"the bridge's answer is too large: {length} bytes")
                payload = await reader.readexactly(length)
            else:
                keep = False
                payload = await _to_close(reader)
            return status, payload
        except asyncio.LimitOverrunError as e:
            keep = False
            raise ValueError("the bridge's answer has a header too large") from e
        except BaseException:
            keep = False
            raise
        finally:
            if keep and not self._closed:
                self._idle.append((reader, writer))
            else:
                writer.close()

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop()[1].close()


class _Dropped(Exception):
    """A connection ended before any byte of the answer."""


def _head(response: bytes) -> tuple[int, int | None, bool, bool]:
    """(status, Content-Length or None, chunked, keep the connection) of a response head."""
    status_line, _, rest = response.partition(b"\r\n")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
    status = int(parts[1])
    keep = parts[0] != b"HTTP/1.0"
    length: int | None = None
    chunked = False
    for line in rest.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding":
            chunked = value.strip().lower().endswith(b"chunked")
        elif name == b"connection":
            keep = value.strip().lower() != b"close"
    return status, (None if chunked else length), chunked, keep


class _TooLarge(ValueError):
    def __init__(self) -> None:
        super().__init__("the body is too large")


async def _to_close(reader: asyncio.StreamReader) -> bytes:
    """A body that ends with the connection."""
    out = bytearray()
    while data := await reader.read(65536):
        out += data
        if len(out) > MAX_BODY:
            raise ValueError("the bridge's answer is too large")
    return bytes(out)


async def _chunks(reader: asyncio.StreamReader, most: int = MAX_BODY) -> bytes:
    """A chunked body, trailers skipped."""
    out = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return bytes(out)
        if len(out) + size > most:
            raise _TooLarge
        out += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk of the bridge's answer is not terminated")


# ------------------------------------------------------------------------------- server


class Asked(NamedTuple):
    """A request: its method, path (no query), headers (names in lower case) and body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    reason: str | None = None  # the status line's text; the standard one if None


Handler = Callable[[Asked], Awaitable[Answer]]


def routed(routes: Mapping[tuple[str, str], Handler]) -> Handler:
    """A handler that passes each request to the one of its (method, path), else 404/405."""
    paths = {path for _, path in routes}

    async def handle(asked: Asked) -> Answer:
        route = routes.get((asked.method, asked.path))
        if route is not None:
            return await route(asked)
        if asked.path in paths:
            return Answer(405, b"method not allowed", "text/plain")
        return Answer(404, b"not found", "text/plain")

    return handle


class PrivateServer:
    """``handle`` served on the unix socket ``path`` (see the module docstring)."""

    def __init__(self, path: str, handle: Handler, max_body: int) -> None:
        self.path = path
        self._handle = handle
        self._max_body = max_body
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._connection, self.path, limit=MAX_HEAD)

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._open):
            writer.close()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        self._server = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            self._open.discard(writer)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request and its answer: whether the connection goes on."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # closed between requests
        except asyncio.LimitOverrunError:
            writer.write(_response(Answer(431, b"request head too large", "text/plain"), True))
            return False
        try:
            method, path, keep, headers = _request_head(head)
            body = await self._body(reader, writer, headers)
        except _TooLarge:
            writer.write(_response(Answer(413, b"request body too large", "text/plain"), True))
            return False
        except (ValueError, asyncio.LimitOverrunError):
            writer.write(_response(Answer(400, b"bad request", "text/plain"), True))
            return False
        try:
            answer = await self._handle(Asked(method, path, headers, body))
        except Exception:
            log.exception("a request on %s failed", self.path, extra={"event": "internal_error"})
            answer = Answer(500, b"internal error", "text/plain")
        writer.write(_response(answer, not keep))
        return keep

    async def _body(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: Mapping[str, str]
    ) -> bytes:
        if headers.get("transfer-encoding", "").lower().endswith("chunked"):
            return await _chunks(reader, self._max_body)
        length = int(headers.get("content-length") or 0)
        if length < 0:
            raise ValueError("a negative Content-Length")
        if length > self._max_body:
            raise _TooLarge
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return await reader.readexactly(length) if length else b""


# A header line: a token, a colon, the value without the white space around it.
_HEADER = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*\r\n")


def _request_head(head: bytes) -> tuple[str, str, bool, dict[str, str]]:
    """(method, path, keep the connection, headers) of a request head (it ends with an
    empty line)."""
    text = head.decode("latin-1")
    request_line, _, rest = text.partition("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.1 request line: {request_line[:80]!r}")
    method, target, version = parts
    found = _HEADER.findall(rest)
    if len(found) != rest.count("\r\n") - 1:  # a line that is not a header
        raise ValueError("a request header that cannot be read")
    headers = {name.lower(): value for name, value in found}
    connection = headers.get("connection", "").lower()
    keep = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
    if not target.startswith("/"):  # absolute-form (http://host/path): its path
        target = "/" + target.partition("://")[2].partition("/")[2]
    return method, target.split("?", 1)[0], keep, headers


def _response(answer: Answer, close: bool) -> bytes:
    reason = answer.reason or _phrase(answer.status)
    lines = [f"HTTP/1.1 {answer.status} {reason}", f"Content-Length: {len(answer.body)}"]
    if answer.content_type is not None:
        lines.append(f"Content-Type: {answer.content_type}")
    lines += [f"{name}: {value}" for name, value in answer.headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + answer.body


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
