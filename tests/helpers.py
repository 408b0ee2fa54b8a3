"""Shared test helpers: waiting on conditions with a deadline, never on fixed sleeps."""

from __future__ import annotations

import asyncio
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeClock:
    """Epoch milliseconds that only move when a test says so."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)
