"""Time as ocd reads it: epoch milliseconds, injectable so tests control it.

The daemon runs on a :class:`SteadyClock`: wall time read at start, then advanced by the
monotonic clock, so that a step of the wall clock (an NTP step, a VM resumed, someone's
``date -s``) neither expires, releases nor delays anything by the size of the step. Every
delay, lease, visibility timeout, retention sweep and cron tick is a time of this clock, and
so are the times shown to users (send timestamps, REST answers, ``ocd status``).

* **Following the wall clock.** While the wall clock and the monotonic clock agree, the
  steady clock reads as the wall clock. After a step it does not jump: it runs at most
  ``1/SLEW_DIVISOR`` (5 %) fast or slow until it meets the wall clock again, so an hour's
  step is absorbed in 20 hours and meanwhile a 60 s lease lasts between 57 and 63 s. Crons
  follow this clock too: after a forward step they run at their usual interval, about 5 %
  faster, until the clock has caught up (a cron due every hour does not run two hours of
  ticks at once); after a backward step nothing runs twice.
* **Never backwards.** It never decreases while the daemon runs, and across restarts it
  starts no earlier than the last time the deployment used, which the daemon persists in
  the store every ``MARK_EVERY_S`` and at shutdown (the highest of every node's, on
  PostgreSQL). A wall clock stepped back across a restart is therefore clamped to that mark
  (plus ``MARK_EVERY_S``, what a crash may have used after the last save; a wall clock
  behind the mark by less than ``STEP_MS``, as another node's may be, carries on from the
  mark itself) and caught up slowly; a wall clock stepped forward across a restart is
  adopted at once, as nothing could tell it from a long stop.
* **Logged.** A step of more than ``STEP_MS`` between two readings is logged once
  (``clock_step``, with its size and direction), and so is the moment the steady clock has
  caught up with the wall clock again (``clock_caught_up``).

Test hook: with ``OCD_TEST_WALL_OFFSET_FILE=<path>`` in the environment, the daemon's wall
clock is ``time.time()`` plus the number of seconds written in that file (re-read at most
every 50 ms; a missing or unreadable file counts as 0). It exists so that tests can step the
wall clock of a real ``ocd serve`` without root; unset, nothing reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable

from ocd.errors import StoreError

log = logging.getLogger(__name__)

Clock = Callable[[], int]

STEP_MS = 2_000  # a jump of the wall clock against the monotonic one that is logged
SLEW_DIVISOR = 20  # catch up with the wall clock at 1/20 of the elapsed time (5 %)
# How often the daemon persists its clock's high-water mark. Each save is a commit and two
# wake-ups of an idle daemon; what a crash may have used after the last save (the margin a
# clock stepped back across a restart starts ahead by) is at most this long.
MARK_EVERY_S = 10.0
TEST_OFFSET_ENV = "OCD_TEST_WALL_OFFSET_FILE"
_TEST_REREAD_NS = 50_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def wall_source() -> Callable[[], int]:
    """The wall clock in epoch nanoseconds: ``time.time_ns``, or with the test hook set
    (see the module docstring), that plus the offset in its file."""
    path = os.environ.get(TEST_OFFSET_ENV)
    if not path:
        return time.time_ns
    state = {"offset": 0, "read_at": -_TEST_REREAD_NS}

    def wall_ns() -> int:
        now = time.monotonic_ns()
        if now - state["read_at"] >= _TEST_REREAD_NS:
            state["read_at"] = now
            try:
                with open(path) as f:
                    state["offset"] = int(float(f.read().strip() or 0) * 1e9)
            except (OSError, ValueError):
                state["offset"] = 0
        return time.time_ns() + state["offset"]

    return wall_ns


class SteadyClock:
    """Epoch milliseconds that follow monotonic time and catch up with the wall clock
    slowly (see the module docstring). Callable: an instance is a :data:`Clock`."""

    def __init__(
        self,
        wall_ns: Callable[[], int] | None = None,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._wall = wall_ns or wall_source()
        self._mono = monotonic_ns
        self._lock = threading.Lock()
        self._last_mono = monotonic_ns()
        self._last_wall = self._wall()
        self._now = self._last_wall  # ns; what this clock reads
        self._behind = False  # a step (or a clamp) is being absorbed

    def __call__(self) -> int:
        with self._lock:
            mono, wall = self._mono(), self._wall()
            elapsed = max(0, mono - self._last_mono)
            step = (wall - self._last_wall) - elapsed
            self._last_mono, self._last_wall = mono, wall
            now = self._now + elapsed
            gap = wall - now
            most = elapsed // SLEW_DIVISOR
            now += max(-most, min(most, gap))
            self._now = now
            if abs(step) > STEP_MS * 1_000_000:
                self._stepped(step, wall - now)
            elif self._behind and abs(wall - now) < 1_000_000:
                self._behind = False
                log.info(
                    "ocd's clock has caught up with the wall clock",
                    extra={"event": "clock_caught_up"},
                )
            return now // 1_000_000

    def offset_ms(self) -> int:
        """Wall clock minus this clock: how much is left to catch up (status, tests)."""
        self()
        with self._lock:
            return (self._last_wall - self._now) // 1_000_000

    def carry_on_from(self, mark_ms: int, margin_ms: int = int(MARK_EVERY_S * 1000)) -> None:
        """At start: never read earlier than ``mark_ms``, the last time persisted by this
        deployment. A wall clock behind the mark (stepped back while ocd was stopped) is
        clamped to it plus ``margin_ms`` (what may have been used after the mark was
        saved) and caught up with slowly; one ahead of it is followed as it is."""
        now_ms = self()
        if now_ms >= mark_ms:
            return
        if mark_ms - now_ms <= STEP_MS:
            # Not a step: another node's clock a little ahead, or a restart within the same
            # moment. Carry on from the mark itself, silently.
            with self._lock:
                self._now = mark_ms * 1_000_000
            return
        with self._lock:
            self._now = (mark_ms + margin_ms) * 1_000_000
            self._behind = True
            behind_s = (self._now - self._last_wall) / 1e9
        log.warning(
            "the wall clock is %.1f s behind the last time this deployment used; ocd's clock "
            "carries on from that time and catches up with the wall clock at %d %% speed",
            behind_s,
            100 // SLEW_DIVISOR,
            extra={"event": "clock_step", "step_ms": -round(behind_s * 1000), "at": "start"},
        )

    def _stepped(self, step_ns: int, gap_ns: int) -> None:
        self._behind = True
        step_s = step_ns / 1e9
        log.warning(
            "the wall clock stepped %s by %.1f s; ocd's clock does not jump with it, it "
            "catches up at %d %% speed (%.1f s to go)",
            "forward" if step_ns > 0 else "back",
            abs(step_s),
            100 // SLEW_DIVISOR,
            abs(gap_ns) / 1e9,
            extra={
                "event": "clock_step",
                "step_ms": round(step_ns / 1e6),
                "direction": "forward" if step_ns > 0 else "back",
                "gap_ms": round(gap_ns / 1e6),
            },
        )


async def keep_mark(
    clock: Clock, save: Callable[[int], Awaitable[None]], every_s: float = MARK_EVERY_S
) -> None:
    """Persist the clock's time every ``every_s`` (a background task of the daemon); the
    readings also let a step be noticed while nothing else reads the clock. A store that
    cannot write now (away, full) is tried again at the next round."""
    failing = False
    while True:
        try:
            await save(clock())
            failing = False
        except StoreError as e:
            if not failing:
                log.warning(
                    "could not persist the clock's mark: %s", e, extra={"event": "mark_failed"}
                )
            failing = True
        await asyncio.sleep(every_s)


async def save_mark(clock: Clock, save: Callable[[int], Awaitable[None]]) -> None:
    """One last save at shutdown; a store that cannot write is not an error here."""
    with contextlib.suppress(StoreError):
        await save(clock())
