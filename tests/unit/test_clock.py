"""The daemon's clock: follows monotonic time, absorbs wall-clock steps slowly, never goes
backwards, and carries on from the persisted mark at start."""

from __future__ import annotations

import logging
import time

import pytest

from ocd.clock import SLEW_DIVISOR, SteadyClock, wall_source

T0_NS = 1_800_000_000_000 * 1_000_000
S = 1_000_000_000  # ns in a second
HOUR = 3600 * S


class Time:
    """A wall clock and a monotonic clock that tests advance together or step apart."""

    def __init__(self) -> None:
        self.wall = T0_NS
        self.mono = 5 * S

    def advance(self, seconds: float) -> None:
        self.wall += int(seconds * S)
        self.mono += int(seconds * S)

    def step(self, seconds: float) -> None:
        self.wall += int(seconds * S)

    def clock(self) -> SteadyClock:
        return SteadyClock(lambda: self.wall, lambda: self.mono)


def steps(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "clock_step"]


def test_reads_as_the_wall_clock_while_nothing_steps():
    t = Time()
    clock = t.clock()
    for _ in range(100):
        assert clock() == t.wall // 1_000_000
        t.advance(0.37)


def test_a_forward_step_neither_expires_nor_releases_anything_by_its_size(caplog):
    t = Time()
    clock = t.clock()
    sent = clock()
    lease_until = sent + 60_000
    retention_end = sent + 3_600_000
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        t.step(2 * 3600)
        t.advance(1)
        assert clock() < sent + 2_000  # one second on, not two hours
        t.advance(50)
        assert clock() < lease_until  # a 60 s lease lasts at least 57 s
        t.advance(3000)
        assert clock() < retention_end
    (record,) = steps(caplog)  # logged once, with its size and direction
    assert record.step_ms == 7_200_000 and record.direction == "forward"


def test_a_backward_step_does_not_hold_back_what_is_ready(caplog):
    t = Time()
    clock = t.clock()
    visible = clock()  # a backlog ready now
    readings = [visible]
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        t.step(-3600)
        for _ in range(20):
            t.advance(0.5)
            readings.append(clock())
    assert readings == sorted(readings)  # never backwards
    assert readings[-1] >= visible + 9_500  # 10 s on, at least 95 % of it
    (record,) = steps(caplog)
    assert record.step_ms == -3_600_000 and record.direction == "back"


def test_catches_up_with_the_wall_clock_at_a_bounded_rate(caplog):
    t = Time()
    clock = t.clock()
    t.step(3600)
    clock()
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        t.advance(3600)
        first = clock()
        # an hour later it has gained 1/SLEW_DIVISOR of the hour on the monotonic clock
        assert first == (T0_NS + 2 * HOUR) // 1_000_000 - 3_600_000 + 3_600_000 // SLEW_DIVISOR
        for _ in range(SLEW_DIVISOR):
            t.advance(3600)
            clock()
    assert clock() == t.wall // 1_000_000
    caught = [r for r in caplog.records if getattr(r, "event", None) == "clock_caught_up"]
    assert len(caught) == 1


def test_jitter_below_the_step_threshold_is_not_logged(caplog):
    t = Time()
    clock = t.clock()
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        for i in range(50):
            t.advance(1)
            t.step(0.5 if i % 2 else -0.5)
            clock()
    assert steps(caplog) == []


def test_a_monotonic_clock_that_stalls_never_moves_the_clock_back():
    t = Time()
    clock = t.clock()
    before = clock()
    t.step(-10)  # wall back, monotonic still
    assert clock() == before


def test_at_start_a_wall_clock_behind_the_mark_is_clamped_to_it(caplog):
    t = Time()
    clock = t.clock()
    mark = t.wall // 1_000_000 + 3_600_000  # the last run used times an hour ahead
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        clock.carry_on_from(mark, margin_ms=2_000)
    assert clock() == mark + 2_000
    t.advance(10)
    assert mark + 2_000 + 9_500 <= clock() <= mark + 12_000
    assert clock.offset_ms() < -3_500_000
    (record,) = steps(caplog)
    assert record.step_ms < 0


def test_at_start_a_wall_clock_a_moment_behind_the_mark_carries_on_from_it_silently(caplog):
    t = Time()
    clock = t.clock()
    mark = t.wall // 1_000_000 + 300  # another node's clock, 300 ms ahead
    with caplog.at_level(logging.INFO, logger="ocd.clock"):
        clock.carry_on_from(mark)
        assert clock() == mark
        t.advance(10)
        assert mark + 9_500 <= clock() <= mark + 10_000
    assert steps(caplog) == []


def test_at_start_a_wall_clock_ahead_of_the_mark_is_adopted():
    t = Time()
    clock = t.clock()
    clock.carry_on_from(t.wall // 1_000_000 - 7_200_000)  # stopped for two hours
    assert clock() == t.wall // 1_000_000
    assert clock.offset_ms() == 0


def test_the_test_hook_adds_the_offset_file_to_the_wall_clock(tmp_path, monkeypatch):
    offset = tmp_path / "offset"
    monkeypatch.setenv("OCD_TEST_WALL_OFFSET_FILE", str(offset))
    wall = wall_source()
    assert abs(wall() - time.time_ns()) < S  # no file yet: no offset
    offset.write_text("7200\n")
    monkeypatch.setenv("OCD_TEST_WALL_OFFSET_FILE", str(offset))
    wall = wall_source()
    assert abs(wall() - time.time_ns() - 2 * HOUR) < S


def test_without_the_test_hook_the_wall_clock_is_time_time_ns(monkeypatch):
    monkeypatch.delenv("OCD_TEST_WALL_OFFSET_FILE", raising=False)
    assert wall_source() is time.time_ns
