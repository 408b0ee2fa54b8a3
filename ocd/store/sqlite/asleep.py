"""How long the calling thread has slept: blocked on I/O or a lock, neither running nor
waiting for a CPU.

The writer commits small groups on the event loop only while the disk is fast, and needs to
tell a slow fsync from a busy machine: wall time counts both, and on a loaded machine a
commit preempted for a few milliseconds would look like a slow disk. Linux reports each
thread's time on a CPU and time waiting for one in ``/proc/thread-self/schedstat``; wall time
minus both is time asleep. Where that file does not exist, wall time stands in.
"""

from __future__ import annotations

import os
import time

SCHEDSTAT = "/proc/thread-self/schedstat"


class Asleep:
    """``asleep()``: seconds the thread that first calls it has slept, from some origin;
    only differences mean anything. Call it from that one thread only."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._available = True

    def __call__(self) -> float:
        now = time.monotonic()
        if self._fd is None and self._available:
            try:
                self._fd = os.open(SCHEDSTAT, os.O_RDONLY)
            except OSError:
                self._available = False
        if self._fd is None:
            return now
        try:
            on_cpu_ns, waiting_ns, _ = os.pread(self._fd, 128, 0).split()
        except (OSError, ValueError):
            return now
        return now - (int(on_cpu_ns) + int(waiting_ns)) / 1e9

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
