"""Time asleep tells a thread blocked on I/O from one that is busy or waiting for a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from ocd.store.sqlite.asleep import SCHEDSTAT, Asleep

pytestmark = pytest.mark.skipif(not os.path.exists(SCHEDSTAT), reason="needs Linux schedstat")


def on_own_thread(work) -> float:
    """Seconds ``work()`` spent asleep, measured on a fresh thread."""
    out: list[float] = []

    def run() -> None:
        asleep = Asleep()
        before = asleep()
        work()
        out.append(asleep() - before)
        asleep.close()

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=10)
    return out[0]


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_blocking_counts_as_asleep():
    assert on_own_thread(lambda: time.sleep(0.05)) >= 0.04


def test_running_or_waiting_for_a_cpu_does_not():
    # Processes, not threads: a thread waiting for the GIL is asleep on a lock.
    hog = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(2 * (os.cpu_count() or 1))]
    try:  # the measured thread now waits for a CPU much of the time
        assert on_own_thread(lambda: spin(0.1)) < 0.03
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_without_schedstat_wall_time_stands_in(monkeypatch):
    monkeypatch.setattr("ocd.store.sqlite.asleep.SCHEDSTAT", "/nonexistent/schedstat")
    assert on_own_thread(lambda: spin(0.05)) >= 0.04
