"""Rate limits of job names: ``"100/s"`` as people write it, ``100/1000`` as Redis keeps it.

A rate limit caps how many jobs of a name *start* per second, minute or hour across
every pool. The fetch script enforces it (see ``lua/fetch.lua``): jobs start one
interval apart (10 ms for ``100/s``), in a burst of at most 100 ms worth of starts (or
two) after a quiet spell, and a pool whose only work is rate-limited sleeps until the
next start is due.
"""

from __future__ import annotations

import math
import re
from typing import Final

import msgspec

__all__ = ["Rate", "parse_rate"]

_PERIODS: Final = {
    "s": 1000,
    "sec": 1000,
    "second": 1000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
}
_SHORT: Final = {1000: "s", 60_000: "min", 3_600_000: "h"}
_TEXT_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")
_STORED_RE: Final = re.compile(r"^(\d+(?:\.\d+)?)/(\d+)$")


class Rate(msgspec.Struct, frozen=True):
    """``count`` job starts per ``period_ms`` milliseconds."""

    count: float
    period_ms: int

    @property
    def stored(self) -> str:
        """The form the ``{ns}:rates`` hash holds: ``<count>/<period ms>``."""
        return f"{_number(self.count)}/{self.period_ms}"

    def __str__(self) -> str:
        unit = _SHORT.get(self.period_ms)
        if unit is None:
            return f"{_number(self.count)}/{self.period_ms}ms"
        return f"{_number(self.count)}/{unit}"

    @classmethod
    def from_stored(cls, text: str) -> Rate | None:
        """The rate a ``{ns}:rates`` value stands for; None for garbage (no limit, as the
        fetch script reads it)."""
        m = _STORED_RE.match(text)
        if m is None or not 0 < float(m[1]) < math.inf or int(m[2]) <= 0:
            return None
        return cls(float(m[1]), int(m[2]))


def parse_rate(text: str | Rate) -> Rate:
    """``"100/s"``, ``"30/min"``, ``"2/hour"`` (``s``/``sec``/``second``,
    ``m``/``min``/``minute``, ``h``/``hour``) as a :class:`Rate`; a ``ValueError`` that
    says what is understood for anything else."""
    if isinstance(text, Rate):
        return text
    m = _TEXT_RE.match(text.lower()) if isinstance(text, str) else None
    if m is None or m[2] not in _PERIODS:
        raise ValueError(
            f"rate: {text!r} is not a rate: write a count per second, minute or hour,"
            " e.g. '100/s', '30/min' or '2/hour'"
        )
    count = float(m[1])
    if not (count > 0 and math.isfinite(count)) or count > 1_000_000:
        raise ValueError(f"rate: {text!r}: the count must be above 0 and at most 1000000")
    return Rate(count, _PERIODS[m[2]])


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)
