"""The HTTP load generators for the REST API scenarios, and the trivial server they compare to.

They share the machine with the server they measure, so they stay lean. The aiohttp one: one
session whose connector keeps a connection per client, request bodies serialised to bytes
before the clock starts, and responses only read and status-checked (a pull response is
parsed: its lease ids are needed for the ack). ``RawLoad``, for single pushes (and the SQS
endpoint's batch sends), goes further: plain ``asyncio.Protocol`` connections and answers
read no further than their status line and Content-Length. ``RawExchange`` is the same
connection for clients that need each answer's body (a receive's receipt handles).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
from harness import BenchError, free_port, percentile, process_cpu_s, wait_until_up

TRIVIAL = Path(__file__).resolve().parent / "apps" / "trivial_server.py"
REQUEST_TIMEOUT_S = 60.0
JSON_HEADERS = {"Content-Type": "application/json"}
JSON_HEADER_LINE = "Content-Type: application/json\r\n"


@dataclass(frozen=True)
class Load:
    """One measured phase: how much it did, in how long, and each request's latency (for a
    pull, the pull and its ack together)."""

    requests: int
    messages: int
    seconds: float
    latencies_s: list[float]

    def summary(self) -> dict[str, float]:
        ms = [s * 1000 for s in self.latencies_s]
        return {
            "msg_s": self.messages / self.seconds,
            "req_s": self.requests / self.seconds,
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
            "p50_ms": round(percentile(ms, 50), 2),
            "p99_ms": round(percentile(ms, 99), 2),
        }


def session(url: str, clients: int) -> aiohttp.ClientSession:
    """A session with one keep-alive connection per client."""
    return aiohttp.ClientSession(
        url,
        connector=aiohttp.TCPConnector(limit=clients),
        headers=JSON_HEADERS,
        skip_auto_headers=("User-Agent",),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
    )


def dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


async def post(s: aiohttp.ClientSession, path: str, body: bytes) -> bytes:
    async with s.post(path, data=body) as r:
        data = await r.read()
    if r.status != 200:
        raise BenchError(f"POST {path}: {r.status} {data[:500]!r}")
    return data


async def together(coros: list[Coroutine[Any, Any, Any]]) -> None:
    """Run ``coros`` concurrently; the first to fail is raised and cancels the others."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()


async def warm_up(s: aiohttp.ClientSession, path: str, body: bytes, clients: int) -> None:
    """One request per client at once, so every connection is open before the clock starts."""
    await together([post(s, path, body) for _ in range(clients)])


async def drive(
    s: aiohttp.ClientSession, path: str, bodies: Sequence[bytes], clients: int, per_request: int
) -> Load:
    """POST every body once from ``clients`` concurrent clients, each sending its next body
    as soon as its previous answer is in; ``per_request`` messages per body."""
    todo = iter(bodies)
    latencies: list[float] = []

    async def client() -> None:
        for body in todo:  # shared: each client takes the next body not yet sent
            sent = time.perf_counter()
            await post(s, path, body)
            latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    await together([client() for _ in range(clients)])
    seconds = time.perf_counter() - started
    return Load(len(bodies), len(bodies) * per_request, seconds, latencies)


async def pull_and_ack(
    s: aiohttp.ClientSession, path: str, pullers: int, batch_size: int, visibility_ms: int
) -> Load:
    """``pullers`` concurrent loops of pull ``batch_size`` -> ack all of it in one request,
    each until a pull comes back empty. ``path`` is the queue's ``.../messages``."""
    pull_body = dumps({"batch_size": batch_size, "visibility_timeout_ms": visibility_ms})
    latencies: list[float] = []
    requests = acked = 0

    async def puller() -> None:
        nonlocal requests, acked
        while True:
            sent = time.perf_counter()
            pulled = json.loads(await post(s, path + "/pull", pull_body))
            requests += 1
            leases = [m["lease_id"] for m in pulled["result"]["messages"]]
            if not leases:
                return
            ack = dumps({"acks": [{"lease_id": lease} for lease in leases]})
            answer = json.loads(await post(s, path + "/ack", ack))
            requests += 1
            if answer["result"]["ackCount"] != len(leases):
                raise BenchError(f"acked {len(leases)} leases, ocd counted {answer['result']}")
            acked += len(leases)
            latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    await together([puller() for _ in range(pullers)])
    return Load(requests, acked, time.perf_counter() - started, latencies)


def _answer(buffer: bytes) -> tuple[int, bytes, bytes] | None:
    """The first whole HTTP/1.1 answer in ``buffer`` (Content-Length framed): (status, body,
    what follows it); None while it is incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buffer[:end].lower()
    at = head.find(b"\r\ncontent-length:")
    length = int(head[at + 17 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
    if len(buffer) < end + 4 + length:
        return None
    return int(head[9:12]), buffer[end + 4 : end + 4 + length], buffer[end + 4 + length :]


def raw_request(port: int, path: str, body: bytes, headers: str = "") -> bytes:
    """A keep-alive POST as bytes; ``headers``: more header lines, each ending in CRLF."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers or JSON_HEADER_LINE}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class RawExchange(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: ``await exchange(request)`` writes a pre-built
    request and returns its answer's status and body, read whole."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None

    @classmethod
    async def open(cls, port: int) -> RawExchange:
        _, conn = await asyncio.get_running_loop().create_connection(cls, "127.0.0.1", port)
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answer = _answer(self.buffer)
        if answer is None:
            return
        status, body, self.buffer = answer
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(BenchError(f"raw client: connection lost ({exc})"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _RawClient(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that sends pre-built requests one at a time and
    reads each answer only as far as its status line and Content-Length."""

    def __init__(self, requests: Iterator[bytes], latencies: list[float]) -> None:
        self.requests = requests
        self.latencies = latencies
        self.buffer = b""
        self.sent = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def send_next(self) -> None:
        assert self.transport is not None
        request = next(self.requests, None)  # shared: the next request not yet sent
        if request is None:
            if not self.done.done():
                self.done.set_result(None)
            return
        self.sent = time.perf_counter()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answer = _answer(self.buffer)
        if answer is None:
            return
        status, body, self.buffer = answer
        if status != 200:
            self._fail(BenchError(f"raw POST: {status} {body[:500]!r}"))
            return
        self.latencies.append(time.perf_counter() - self.sent)
        self.send_next()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(BenchError(f"raw client: connection lost ({exc})"))

    def _fail(self, error: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(error)
        if self.transport is not None:
            self.transport.close()


class RawLoad:
    """A lean load generator for the single pushes: ``clients`` keep-alive connections on
    ``asyncio.Protocol``, requests built to bytes beforehand, answers parsed no further than
    the status line and Content-Length. It costs about a quarter of the aiohttp client's
    CPU per request, so that a fast server, not the generator, sets the pace."""

    def __init__(self, port: int, clients: int) -> None:
        self.port = port
        self.clients = clients
        self.conns: list[_RawClient] = []
        self.latencies: list[float] = []

    def request(self, path: str, body: bytes, headers: str = "") -> bytes:
        return raw_request(self.port, path, body, headers)

    async def __aenter__(self) -> RawLoad:
        loop = asyncio.get_running_loop()
        for _ in range(self.clients):
            _, conn = await loop.create_connection(
                lambda: _RawClient(iter(()), self.latencies), "127.0.0.1", self.port
            )
            self.conns.append(conn)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for conn in self.conns:
            if conn.transport is not None:
                conn.transport.close()

    async def drive(self, requests: Sequence[bytes], per_request: int = 1) -> Load:
        """Send every request once, each connection its next as soon as its answer is in;
        ``per_request`` messages per request."""
        self.latencies.clear()
        todo = iter(requests)
        for conn in self.conns:
            conn.requests = todo
            conn.done = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        for conn in self.conns:
            conn.send_next()
        await asyncio.gather(*(conn.done for conn in self.conns))
        seconds = time.perf_counter() - started
        return Load(len(requests), len(requests) * per_request, seconds, list(self.latencies))


class TrivialServer:
    """``apps/trivial_server.py`` as a subprocess on a free port; use ``async with``."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        assert self.proc is not None
        return process_cpu_s(self.proc.pid)

    async def __aenter__(self) -> TrivialServer:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(TRIVIAL), str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        try:
            await self._wait_healthy(timeout_s=30)
        except BaseException:
            self._kill()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._kill()

    async def _wait_healthy(self, timeout_s: float) -> None:
        if not await wait_until_up(f"{self.url}/healthz", timeout_s, self._check_alive):
            raise BenchError(f"trivial server not up within {timeout_s} s")

    def _check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise BenchError(f"trivial server exited:\n{self.log_path.read_text()}")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
