"""Cron expressions for periodic jobs, and the next time one fires.

Five fields (minute hour day-of-month month day-of-week), or six with seconds first;
each field takes ``*``, numbers, ``a-b`` ranges, ``/step`` and ``,`` lists; day-of-week
runs 0-6 from Sunday (7 is Sunday too). When both day fields are restricted, a day
matching either fires, as in Vixie cron. ``@hourly``, ``@daily``, ``@weekly``,
``@monthly`` and ``@yearly`` are shortcuts. Times are UTC unless a zone is given.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["Cron"]

_SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# (lowest, highest) of: second, minute, hour, day of month, month, day of week
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("second", "minute", "hour", "day of month", "month", "day of week")
_HORIZON = timedelta(days=366 * 5)


def _field(text: str, index: int) -> frozenset[int]:
    lo, hi = _BOUNDS[index]
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if body == "*":
                start, end = lo, hi
            elif "-" in body:
                a, b = body.split("-", 1)
                start, end = int(a), int(b)
            else:
                start = int(body)
                end = hi if step_text else start
        except ValueError:
            raise ValueError(f"bad {_NAMES[index]} field {text!r}") from None
        if step < 1 or not lo <= start <= end <= hi:
            raise ValueError(f"{_NAMES[index]} field {text!r} is outside {lo}-{hi}")
        values.update(range(start, end + 1, step))
    if index == 5 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


class Cron:
    """A parsed cron expression: ``Cron("*/5 * * * *").next_after(now)``."""

    __slots__ = ("_dom_any", "_dow_any", "expression", "fields", "tz")

    def __init__(self, expression: str, tz: str | tzinfo | None = None) -> None:
        self.expression = expression
        parts = _SHORTCUTS.get(expression.strip(), expression).split()
        if len(parts) == 5:
            parts = ["0", *parts]
        if len(parts) != 6:
            raise ValueError(f"cron expression {expression!r} needs 5 or 6 fields")
        self.fields = tuple(_field(p, i) for i, p in enumerate(parts))
        self._dom_any = parts[3] == "*"
        self._dow_any = parts[5] == "*"
        self.tz = ZoneInfo(tz) if isinstance(tz, str) else (tz or UTC)

    def _day_matches(self, t: datetime) -> bool:
        dom = t.day in self.fields[3]
        dow = (t.isoweekday() % 7) in self.fields[5]
        if self._dom_any or self._dow_any:
            return dom and dow
        return dom or dow

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after ``moment`` (an aware datetime)."""
        seconds, minutes, hours, _, months, _ = self.fields
        t = moment.astimezone(self.tz).replace(microsecond=0) + timedelta(seconds=1)
        limit = t + _HORIZON
        while t < limit:
            if t.month not in months:
                t = (t.replace(day=1, hour=0, minute=0, second=0) + timedelta(days=32)).replace(
                    day=1
                )
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0, second=0) + timedelta(days=1)
            elif t.hour not in hours:
                t = t.replace(minute=0, second=0) + timedelta(hours=1)
            elif t.minute not in minutes:
                t = t.replace(second=0) + timedelta(minutes=1)
            elif t.second not in seconds:
                t += timedelta(seconds=1)
            else:
                return t
        raise ValueError(f"cron expression {self.expression!r} never fires")
