"""HTTP/1.1 POSTs to the bridge Worker's private unix socket, on kept-alive connections.

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
"""

from __future__ import annotations

import asyncio

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


async def _to_close(reader: asyncio.StreamReader) -> bytes:
    """A body that ends with the connection."""
    out = bytearray()
    while data := await reader.read(65536):
        out += data
        if len(out) > MAX_BODY:
            raise ValueError("the bridge's answer is too large")
    return bytes(out)


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    """A chunked body, trailers skipped."""
    out = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return bytes(out)
        if len(out) + size > MAX_BODY:
            raise ValueError("the bridge's answer is too large")
        out += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk of the bridge's answer is not terminated")
