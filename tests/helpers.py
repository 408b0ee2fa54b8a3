"""Shared test helpers: waiting on conditions with a deadline, never on fixed sleeps."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T], timeout: float = 10.0, interval: float = 0.01
) -> T:
    """Call ``check`` until it returns something truthy; fail with its last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        result = check()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")
        await asyncio.sleep(interval)


def wait_sync(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.01) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        result = check()
        if result:
            return result
        last = result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")
        time.sleep(interval)


# Ports handed out by this process under pytest-xdist, not handed out again.
_handed: set[int] = set()
XDIST_PORTS = 1_500  # a worker's range
XDIST_FIRST_PORT = 10_000  # below the kernel's ephemeral ports (32,768 and up)


def free_port() -> int:
    """A port of 127.0.0.1 free now, for a server a test starts. Under pytest-xdist each
    worker picks from a range of its own below the ephemeral ports: a port the kernel gave
    one worker for a bind to port 0 (the way to find a free one) could be given to the other
    worker too before the first one's server had bound it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...
    if not worker:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    lo = XDIST_FIRST_PORT + XDIST_PORTS * (int(worker.removeprefix("gw")) % 15)
    for port in random.sample(range(lo, lo + XDIST_PORTS), XDIST_PORTS):
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free port left in {lo}..{lo + XDIST_PORTS - 1} for {worker}")


class FakeClock:
    """Epoch milliseconds that only move when a test says so."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)
