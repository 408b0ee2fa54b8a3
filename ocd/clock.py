"""Time as ocd reads it: epoch milliseconds, injectable so tests control it."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
