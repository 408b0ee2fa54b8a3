"""What keeps hostile or broken connections from starving the daemon.

* A request's head must arrive within ``header_timeout`` of the connection opening (or of
  the first byte of a later request on a kept-alive connection); a connection idle between
  requests is closed after ``keepalive_timeout``. Slow-header (slowloris) and half-open
  connections so hold a descriptor for seconds, not forever.
* At most ``max_connections`` are open at once, over every listener together. A connection
  beyond it closes the oldest idle one (waiting for a request head: half-open, slow or kept
  alive) to make room; when none is idle it is answered ``503`` in its listener's error
  shape and closed. One log line says so, at most once a minute.
* Errors aiohttp makes itself (a malformed request line or header) are answered in the
  listener's error shape too, logged as one line instead of a traceback.
* :func:`raise_nofile` lifts the soft descriptor limit to the hard one at start.

The request body's own limits (size after inflating, ``body_timeout``) are ``ocd.http.body``'s.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

REPORT_EVERY_S = 60.0  # the rate of the connection-limit and timeout log lines
REFUSING_MAX = 64  # connections being answered 503 at once; beyond, closed unanswered
REFUSE_LINGER_S = 1.0  # how long a refused connection may take to send its request head
DESCRIPTOR_RESERVE = 128  # descriptors kept for the database, pool, files and logs
DEFAULT_MAX_CONNECTIONS = 1000

ErrorShape = Callable[[int, str], web.Response]
# a listener whose error shape depends on the request (the SQS one: its protocol)
RequestErrorShape = Callable[[web.BaseRequest, int, str], web.Response]


def plain_error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


@dataclass(frozen=True, slots=True)
class Timeouts:
    header_s: float = 10.0
    keepalive_s: float = 60.0


def raise_nofile() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns (before, now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard
    if want == resource.RLIM_INFINITY or want > 1 << 20:
        want = max(soft, 1 << 20)  # Linux refuses more than fs.nr_open (default 2**20)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, want
    return soft, soft


def connection_cap(configured: int | None, nofile: int) -> int:
    """``max_connections`` as configured, else derived from the descriptor limit; never
    more than the limit leaves after the reserve."""
    room = max(16, nofile - DESCRIPTOR_RESERVE)
    if configured is None:
        return min(DEFAULT_MAX_CONNECTIONS, room)
    return min(configured, room)


def raw_response(resp: web.Response) -> bytes:
    """A whole HTTP/1.1 response, to be written on a transport aiohttp does not serve."""
    body = resp.body if isinstance(resp.body, bytes) else b""
    lines = [f"HTTP/1.1 {resp.status} {resp.reason}"]
    headers = dict(resp.headers)
    headers["Content-Length"] = str(len(body))
    headers["Connection"] = "close"
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Report:
    """Counts an event and logs it at most once every REPORT_EVERY_S."""

    def __init__(self, event: str, text: Callable[[int], str]) -> None:
        self.event = event
        self.text = text
        self.count = 0
        self.total = 0
        self._last = -REPORT_EVERY_S

    def note(self) -> None:
        self.count += 1
        self.total += 1
        now = time.monotonic()
        if now - self._last >= REPORT_EVERY_S:
            log.warning(self.text(self.count), extra={"event": self.event, "count": self.count})
            self.count = 0
            self._last = now


class Gate:
    """The connections of every listener, oldest first; at the cap, the oldest idle one
    makes room, else the new one is refused."""

    def __init__(self, max_connections: int) -> None:
        self.max = max_connections
        self.open: dict[GuardedHandler, None] = {}  # insertion order: oldest first
        self.refusing = 0
        self.evicted = _Report(
            "connections_limited",
            lambda n: (
                f"connection limit reached ({self.max} open, server.max_connections): "
                f"{n} idle connection(s) closed to make room"
            ),
        )
        self.refused = _Report(
            "connections_refused",
            lambda n: (
                f"connection limit reached ({self.max} open, server.max_connections), "
                f"none idle: {n} connection(s) answered 503"
            ),
        )
        self.head_timeouts = _Report(
            "header_timeout",
            lambda n: (
                f"closed {n} connection(s) that sent no complete request head in time "
                "(server.header_timeout)"
            ),
        )

    def admit(self) -> bool:
        """Whether a new connection may be served, closing the oldest idle one if need be."""
        if len(self.open) < self.max:
            return True
        for h in self.open:
            if h.idle:
                del self.open[h]
                h.force_close()
                self.evicted.note()
                return True
        return False


class Listener:
    """One listening socket's protocol factory: guarded aiohttp handlers, or a refusal."""

    def __init__(
        self,
        gate: Gate,
        timeouts: Timeouts,
        error: ErrorShape,
        server: web.Server,
        request_error: RequestErrorShape | None = None,
    ) -> None:
        self.gate = gate
        self.timeouts = timeouts
        self.error = error
        self.request_error = request_error
        self.server = server
        self._refusal = raw_response(
            _retry_later(error(503, "ocd is at its connection limit; try again shortly"))
        )

    def __call__(self) -> asyncio.Protocol:
        if self.gate.admit():
            kwargs: dict[str, Any] = dict(self.server._kwargs)  # what AppRunner was given
            kwargs["keepalive_timeout"] = self.timeouts.keepalive_s
            return GuardedHandler(self.server, self, loop=asyncio.get_running_loop(), **kwargs)
        self.gate.refused.note()
        return _Refusal(self.gate, self._refusal)


def _retry_later(resp: web.Response) -> web.Response:
    resp.headers["Retry-After"] = "1"
    return resp


class GuardedHandler(RequestHandler):
    """aiohttp's request handler with a head timeout, a place in the gate, and errors in
    the listener's shape."""

    def __init__(self, manager: web.Server, listener: Listener, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._listener = listener
        self._head_timer: asyncio.TimerHandle | None = None
        self._heads_seen = 0

    @property
    def idle(self) -> bool:
        """Waiting for a request head (none started, or one under way too slowly)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._listener.gate.open[self] = None
        self._arm_head_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._listener.gate.open.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and data and self.idle:
            self._arm_head_timer()  # a new request begins on a kept-alive connection
        super().data_received(data)
        if self._head_timer is not None and self._request_count != self._heads_seen:
            self._head_timer.cancel()
            self._head_timer = None

    def _arm_head_timer(self) -> None:
        self._heads_seen = self._request_count
        self._head_timer = self._loop.call_later(self._listener.timeouts.header_s, self._head_due)

    def _head_due(self) -> None:
        self._head_timer = None
        if self._request_count == self._heads_seen and not self._force_close:
            self._listener.gate.head_timeouts.note()
            self.force_close()

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
            text = "Unknown Internal Error"
        else:  # a malformed request: the client's doing, one line is enough
            if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
                status = exc.code
            detail = message or (exc.message if isinstance(exc, HttpProcessingError) else "")
            log.info(
                "malformed HTTP request from %s: %s",
                request.remote,
                detail,
                extra={"event": "bad_http_request"},
            )
            text = f"malformed HTTP request: {detail}".rstrip(": ")
        if request.writer.output_size > 0:
            raise ConnectionError("a response was under way; cannot send an error")
        shaped = self._listener.request_error
        resp = shaped(request, status, text) if shaped else self._listener.error(status, text)
        resp.force_close()
        return resp


class _Refusal(asyncio.Protocol):
    """A connection beyond the cap: a 503 written at once, closed once the request head
    has come (so the client reads the 503 rather than a reset), or after a second."""

    def __init__(self, gate: Gate, payload: bytes) -> None:
        self.gate = gate
        self.payload = payload
        self.transport: asyncio.Transport | None = None
        self.seen = b""
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.gate.refusing >= REFUSING_MAX:
            transport.abort()
            return
        self.gate.refusing += 1
        transport.write(self.payload)
        self.timer = asyncio.get_running_loop().call_later(REFUSE_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        buf = self.seen + data
        if b"\r\n\r\n" in buf and self.transport is not None:
            self.transport.close()
        self.seen = buf[-3:]

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.gate.refusing -= 1
            self.timer = None


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through a :class:`Listener`."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        *,
        gate: Gate,
        timeouts: Timeouts,
        error: ErrorShape,
        request_error: RequestErrorShape | None = None,
    ) -> None:
        super().__init__(runner, host, port, reuse_address=True)
        self.gate = gate
        self.timeouts = timeouts
        self.error = error
        self.request_error = request_error

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            Listener(self.gate, self.timeouts, self.error, server, self.request_error),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


def gate_for(configured: int | None) -> Gate:
    """The daemon's connection gate: the descriptor limit raised, the cap derived from it."""
    before, nofile = raise_nofile()
    cap = connection_cap(configured, nofile)
    if configured is not None and cap < configured:
        log.warning(
            "server.max_connections = %d is more than the descriptor limit (%d) leaves; using %d",
            configured,
            nofile,
            cap,
            extra={"event": "max_connections_lowered", "max_connections": cap},
        )
    raised = f" (raised from {before})" if nofile != before else ""
    log.info(
        "descriptor limit %d%s; at most %d connections",
        nofile,
        raised,
        cap,
        extra={"event": "descriptor_limit", "nofile": nofile, "max_connections": cap},
    )
    return Gate(cap)
