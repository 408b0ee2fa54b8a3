"""Cron expressions as Cloudflare's cron triggers write them, and when they are due.

Five fields, in UTC: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
JAN-DEC) and day of week (1-7 or SUN-SAT, 1 = Sunday). Each field takes ``*``, numbers,
ranges ``a-b``, steps ``*/n`` and ``a-b/n``, and lists ``a,b``. Day of month also takes
``L`` (the last day), ``LW`` (the last weekday) and ``nW`` (the weekday nearest day n, within
the month); day of week takes ``L`` (Saturday), ``nL`` (the last day n of the month) and
``n#k`` (the k-th day n of the month). When both day fields are restricted a day matching
either runs, as in classic cron. Pure: no clock, no I/O.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

MINUTE_MS = 60_000

_MONTHS = {m.upper(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAYS = {d: i + 1 for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 1, 7, _DAYS),
)
_ITEM = re.compile(r"(\*|\w+)(?:-(\w+))?(?:/(\d+))?")
# How far ahead (or back) a schedule is searched: long enough for "29 Feb" on a Sunday.
_SEARCH_DAYS = 366 * 28


class CronError(ValueError):
    """An expression Cloudflare would refuse; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # days of month, 1..31
    months: frozenset[int]
    weekdays: frozenset[int]  # 1 = Sunday .. 7 = Saturday
    days_any: bool  # day of month is "*"
    weekdays_any: bool
    last_day: bool = False  # L
    last_weekday: bool = False  # LW
    nearest_weekday: frozenset[int] = frozenset()  # nW
    last_of: frozenset[int] = frozenset()  # nL: the last weekday n of the month
    nth_of: frozenset[tuple[int, int]] = frozenset()  # n#k: (weekday, k)

    # ------------------------------------------------------------ matching

    def _day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = self._dom_matches(day)
        dow = self._dow_matches(day)
        if self.days_any and self.weekdays_any:
            return True
        if self.days_any:
            return dow
        if self.weekdays_any:
            return dom
        return dom or dow

    def _dom_matches(self, day: dt.date) -> bool:
        last = calendar.monthrange(day.year, day.month)[1]
        if day.day in self.days or (self.last_day and day.day == last):
            return True
        if self.last_weekday and day == _nearest_weekday(day.year, day.month, last, last):
            return True
        return any(
            day == _nearest_weekday(day.year, day.month, min(n, last), last)
            for n in self.nearest_weekday
        )

    def _dow_matches(self, day: dt.date) -> bool:
        weekday = (day.isoweekday() % 7) + 1  # Sunday 1 .. Saturday 7
        if weekday in self.weekdays:
            return True
        last = calendar.monthrange(day.year, day.month)[1]
        if weekday in self.last_of and day.day + 7 > last:
            return True
        return (weekday, (day.day - 1) // 7 + 1) in self.nth_of

    def matches(self, ms: int) -> bool:
        """Whether the minute holding epoch milliseconds ``ms`` is one of this schedule's."""
        t = _utc(ms)
        return t.minute in self.minutes and t.hour in self.hours and self._day_matches(t.date())

    # ------------------------------------------------------------ searching

    def next_after(self, ms: int) -> int:
        """The first due minute strictly after ``ms``, in epoch milliseconds."""
        start = _utc((ms // MINUTE_MS + 1) * MINUTE_MS)
        day = start.date()
        for _ in range(_SEARCH_DAYS):
            if self._day_matches(day):
                first = (start.hour, start.minute) if day == start.date() else (0, 0)
                for hour in sorted(h for h in self.hours if h >= first[0]):
                    low = first[1] if hour == first[0] else 0
                    minute = min((m for m in self.minutes if m >= low), default=None)
                    if minute is not None:
                        return _ms(day, hour, minute)
            day += dt.timedelta(days=1)
        raise CronError(f"{self.expr!r} never comes due")

    def latest_at_or_before(self, ms: int) -> int | None:
        """The last due minute at or before ``ms``; None if there was none in 28 years."""
        end = _utc(ms // MINUTE_MS * MINUTE_MS)
        day = end.date()
        for _ in range(_SEARCH_DAYS):
            if self._day_matches(day):
                last = (end.hour, end.minute) if day == end.date() else (23, 59)
                for hour in sorted((h for h in self.hours if h <= last[0]), reverse=True):
                    high = last[1] if hour == last[0] else 59
                    minute = max((m for m in self.minutes if m <= high), default=None)
                    if minute is not None:
                        return _ms(day, hour, minute)
            day -= dt.timedelta(days=1)
        return None


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _ms(day: dt.date, hour: int, minute: int) -> int:
    t = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
    return int(t.timestamp()) * 1000


def _nearest_weekday(year: int, month: int, n: int, last: int) -> dt.date:
    """The Monday-to-Friday day nearest day ``n``, not leaving the month."""
    day = dt.date(year, month, n)
    if day.weekday() == 5:  # Saturday: Friday, or Monday when the 1st is a Saturday
        return day - dt.timedelta(days=1) if n > 1 else day + dt.timedelta(days=2)
    if day.weekday() == 6:  # Sunday: Monday, or Friday when it is the month's last day
        return day + dt.timedelta(days=1) if n < last else day - dt.timedelta(days=2)
    return day


def parse(expr: str) -> Cron:
    """Parse ``expr``; raises CronError naming the field that is wrong."""
    fields = expr.split()
    if len(fields) != 5:
        raise CronError(
            f"a cron expression has five fields (minute hour day-of-month month "
            f"day-of-week), got {len(fields)}"
        )
    values: list[frozenset[int]] = []
    extra: dict[str, object] = {}
    for i, (text, (label, lo, hi, names)) in enumerate(zip(fields, _FIELDS, strict=True)):
        plain: list[str] = []
        for item in text.split(","):
            up = item.upper()
            if i == 2 and up in ("L", "LW"):
                extra["last_day" if up == "L" else "last_weekday"] = True
            elif i == 2 and up.endswith("W") and up[:-1].isdigit():
                extra.setdefault("nearest_weekday", set()).add(_number(up[:-1], label, 1, 31))  # type: ignore[attr-defined]
            elif i == 4 and up == "L":
                plain.append("7")
            elif i == 4 and up.endswith("L") and len(up) > 1:
                extra.setdefault("last_of", set()).add(_value(up[:-1], label, lo, hi, names))  # type: ignore[attr-defined]
            elif i == 4 and "#" in up:
                day, _, nth = up.partition("#")
                pair = (_value(day, label, lo, hi, names), _number(nth, f"{label} (#)", 1, 5))
                extra.setdefault("nth_of", set()).add(pair)  # type: ignore[attr-defined]
            else:
                plain.append(up)
        values.append(_field(plain, label, lo, hi, names))
    special = {k: frozenset(v) if isinstance(v, set) else v for k, v in extra.items()}
    return Cron(
        expr=expr,
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=values[4],
        days_any=fields[2] == "*",
        weekdays_any=fields[4] == "*",
        **special,  # type: ignore[arg-type]
    )


def _field(items: list[str], label: str, lo: int, hi: int, names: dict[str, int]) -> frozenset[int]:
    out: set[int] = set()
    for item in items:
        m = _ITEM.fullmatch(item)
        if m is None:
            raise CronError(f"{label}: {item!r} is not a value, range or step")
        first, last, step = m.groups()
        if first == "*":
            if last is not None:
                raise CronError(f"{label}: {item!r} is not a value, range or step")
            a, b = lo, hi
        else:
            a = _value(first, label, lo, hi, names)
            b = _value(last, label, lo, hi, names) if last is not None else (hi if step else a)
        if a > b:
            raise CronError(f"{label}: range {item!r} runs backwards")
        n = _number(step, f"{label} step", 1, hi - lo + 1) if step else 1
        out.update(range(a, b + 1, n))
    return frozenset(out)


def _value(text: str, label: str, lo: int, hi: int, names: dict[str, int]) -> int:
    if text in names:
        return names[text]
    return _number(text, label, lo, hi)


def _number(text: str, label: str, lo: int, hi: int) -> int:
    if not (text.isascii() and text.isdigit()) or not lo <= int(text) <= hi:
        raise CronError(f"{label}: {text!r} is not in {lo}..{hi}")
    return int(text)
