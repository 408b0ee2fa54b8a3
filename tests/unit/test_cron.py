"""Cron expressions as Cloudflare's cron triggers accept them, and when they come due."""

from __future__ import annotations

import datetime as dt

import pytest

from ocd.cron import CronError, parse


def ms(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp() * 1000)


def utc(value: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(value / 1000, dt.UTC).replace(tzinfo=None)


@pytest.mark.parametrize(
    ("expr", "after", "due"),
    [
        ("*/5 * * * *", (2026, 1, 1, 0, 2), (2026, 1, 1, 0, 5)),
        ("*/5 * * * *", (2026, 1, 1, 0, 5), (2026, 1, 1, 0, 10)),  # strictly after
        ("0 12 L * *", (2026, 2, 3), (2026, 2, 28, 12, 0)),  # last day of February
        ("0 9 * * 2#1", (2026, 3, 1), (2026, 3, 2, 9, 0)),  # first Monday (1 = Sunday)
        ("0 9 * * 6L", (2026, 3, 1), (2026, 3, 27, 9, 0)),  # last Friday
        ("0 9 15W * *", (2026, 3, 1), (2026, 3, 16, 9, 0)),  # the 15th is a Sunday
        ("0 9 1W * *", (2026, 7, 31), (2026, 8, 3, 9, 0)),  # Aug 1 Saturday -> Monday 3rd
        ("0 9 LW * *", (2026, 5, 1), (2026, 5, 29, 9, 0)),  # May 31 is a Sunday
        ("30 2 * JAN-MAR MON-FRI", (2026, 3, 31, 3), (2027, 1, 1, 2, 30)),
        ("0 0 29 2 *", (2026, 3, 1), (2028, 2, 29, 0, 0)),
        ("15 10 * * sun", (2026, 1, 1), (2026, 1, 4, 10, 15)),
        ("0 0 1 * 1", (2026, 1, 2), (2026, 1, 4, 0, 0)),  # day fields OR'ed, as classic cron
        ("0 */6 * * *", (2026, 1, 1, 5, 59), (2026, 1, 1, 6, 0)),
        ("5-10/5 1,3 * * *", (2026, 1, 1, 1, 6), (2026, 1, 1, 1, 10)),
    ],
)
def test_next_due_minute(expr, after, due):
    assert utc(parse(expr).next_after(ms(*after))) == dt.datetime(*due)


def test_latest_at_or_before_and_matches():
    c = parse("*/15 * * * *")
    assert utc(c.latest_at_or_before(ms(2026, 1, 1, 0, 44, 59))) == dt.datetime(2026, 1, 1, 0, 30)
    assert utc(c.latest_at_or_before(ms(2026, 1, 1, 0, 45))) == dt.datetime(2026, 1, 1, 0, 45)
    assert c.matches(ms(2026, 1, 1, 0, 45, 30)) and not c.matches(ms(2026, 1, 1, 0, 46))


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("* * * *", "five fields"),
        ("60 * * * *", "minute: '60' is not in 0..59"),
        ("* 24 * * *", "hour: '24' is not in 0..23"),
        ("* * 0 * *", "day of month: '0' is not in 1..31"),
        ("* * * 13 *", "month: '13' is not in 1..12"),
        ("* * * * 8", "day of week: '8' is not in 1..7"),
        ("* * * FOO *", "month: 'FOO' is not in 1..12"),
        ("5-1 * * * *", "minute: range '5-1' runs backwards"),
        ("*/0 * * * *", "minute step: '0'"),
        ("* * * * 2#6", "day of week (#): '6' is not in 1..5"),
        ("* * 32W * *", "day of month: '32' is not in 1..31"),
    ],
)
def test_a_wrong_expression_names_the_field(expr, message):
    with pytest.raises(CronError) as e:
        parse(expr)
    assert message in str(e.value)
