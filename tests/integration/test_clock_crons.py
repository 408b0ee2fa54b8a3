"""Crons on the daemon's steady clock: a wall-clock step neither runs missed ticks at once
nor runs a tick twice; the schedule keeps its interval while the clock catches up."""

from __future__ import annotations

import datetime as dt

import runtime
from ocd import cron
from ocd.clock import SteadyClock
from ocd.metrics import Metrics
from ocd.scheduler import Schedule, Scheduler
from ocd.store import SqliteStore

S = 1_000_000_000


def at(hour: int, minute: int, second: int = 0) -> int:
    return int(dt.datetime(2027, 3, 1, hour, minute, second, tzinfo=dt.UTC).timestamp() * 1000)


class Time:
    def __init__(self, start_ms: int) -> None:
        self.wall = start_ms * 1_000_000
        self.mono = 0

    def advance(self, seconds: int) -> None:
        self.wall += seconds * S
        self.mono += seconds * S


async def test_crons_follow_the_steady_clock_over_wall_clock_steps(tmp_path):
    t = Time(at(12, 3, 20))
    clock = SteadyClock(lambda: t.wall, lambda: t.mono)
    store = SqliteStore(tmp_path / "data")
    await store.open(clock())
    calls: list[int] = []

    async def handler(controller, env, ctx) -> None:
        calls.append(controller.scheduledTime)

    s = Scheduler(
        store,
        clock,
        Metrics(),
        [Schedule("app", cron.parse("*/5 * * * *"), handler, runtime.Env({}), 10.0)],
    )
    try:
        await s.run_due()  # first seen
        t.wall += 2 * 3600 * S  # forward two hours: 14:03:20 on the wall
        await s.run_due()
        await s.idle()
        assert calls == []  # neither 12:05 early nor 14:00 at once
        t.advance(100)  # 100 s later; the clock gains 5 s of the gap: 12:05:05
        await s.run_due()
        await s.idle()
        assert calls == [at(12, 5)]
        t.wall -= 3 * 3600 * S  # back three hours: 11:05 on the wall
        t.advance(60)
        await s.run_due()
        await s.idle()
        assert calls == [at(12, 5)]  # 12:05 does not run again, nor does 11:05
        t.advance(300)  # at 95 % speed for 300 s the steady clock passes 12:10 (12:10:47)
        await s.run_due()
        await s.idle()
        assert calls == [at(12, 5), at(12, 10)]
    finally:
        await store.close()
