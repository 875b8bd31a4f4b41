"""Cron expressions for periodic jobs, and the next time one fires, by cronsim.

cronsim (the parser healthchecks.io runs on) was chosen over croniter and a hand-written
parser for three reasons: it gets daylight saving right (a 02:30 job fires once on the
day clocks spring forward, at 03:00, and once on the day they fall back, where croniter
fires twice), it is small and kept, and it reads what users of Vixie cron and Quartz
write: five fields, or six with seconds first; names (``MON-FRI``, ``JAN``); ``L``
(last day of the month), ``LW``, ``5#2`` (the second Friday), ranges, steps and lists;
when both day fields are restricted a day matching either fires. rota adds the
shortcuts ``@yearly``, ``@monthly``, ``@weekly``, ``@daily``, ``@hourly`` (and
``@annually``, ``@midnight``), and reads a ``?`` day field (Quartz's "no specific
value") as ``*``. ``@reboot`` has no fire time to claim once across pools: enqueue from
the pool's lifespan instead. Times are UTC unless a zone is given.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

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


class Cron:
    """A checked cron expression: ``Cron("*/5 * * * *").next_after(now)``. A bad one is a
    ``ValueError`` that quotes it and says what is wrong."""

    __slots__ = ("_text", "expression", "tz")

    def __init__(self, expression: str, tz: str | tzinfo | None = None) -> None:
        self.expression = expression
        text = expression.strip()
        if text == "@reboot":
            raise ValueError(
                "cron expression '@reboot' has no fire time: enqueue the job from the"
                " pool's lifespan instead"
            )
        parts = _SHORTCUTS.get(text, text).split()
        if len(parts) in (5, 6):  # a ? day field means "any day"
            parts[-3:] = ["*" if p == "?" else p for p in parts[-3:]]
        self._text = " ".join(parts)
        try:
            self.tz = ZoneInfo(tz) if isinstance(tz, str) else (tz or UTC)
        except (ValueError, KeyError) as exc:
            raise ValueError(f"unknown time zone {tz!r}: {exc}") from None
        try:
            CronSim(self._text, datetime.now(self.tz))
        except CronSimError as exc:
            raise ValueError(f"cron expression {expression!r}: {exc}") from None

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after ``moment`` (an aware datetime)."""
        start = moment.astimezone(self.tz).replace(microsecond=0)
        try:
            return next(CronSim(self._text, start))
        except (CronSimError, StopIteration):
            raise ValueError(f"cron expression {self.expression!r} never fires") from None
