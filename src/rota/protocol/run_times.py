"""Run-time histograms of finished attempts: the buckets, the slots they are kept in, and
how a read turns counters written by the finish script (``lua/_runtimes.lua``) into
percentiles.

Why buckets: a percentile needs every run time or a sketch of them. A fixed set of 40
log-spaced buckets costs one ``HINCRBY`` per job name and bucket in each finish call
(the finish already gathers its counters per call), and a bounded hash per name and
slot, whatever the throughput.

Bucket ``i`` (0-38) counts the attempts that ran at most :data:`BOUNDS` ``[i]`` ms and
more than the bound before it; bucket 39 counts those over the last bound (about 82
minutes). The bounds are ``ceil(1.5 ** i)``: a run time is a whole number of ms, so
buckets 0-3 are exact (0-1, 2, 3 and 4 ms), and above them a percentile read as its
bucket's upper bound is never below the true value and overstates it by less than 50 %
(each bound is less than 1.5 times the first whole ms over the bound before it).

Slots: the counters of one job name are kept per UTC ten-minute slot, in one hash
(``Keys.run_times(name, slot)``: bucket index -> attempts) that expires
:data:`SLOT_TTL` seconds after its last new field. The hour window sums the current
slot and the 6 before it (60 to 70 minutes), the day window the current and the 144
before it (24 h to 24 h 10 min).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

__all__ = [
    "BOUNDS",
    "BUCKETS",
    "SLOTS",
    "SLOT_MINUTES",
    "SLOT_TTL",
    "Window",
    "bucket_of",
    "percentile",
    "read_counts",
    "slot_of",
    "slots",
]

#: Upper bounds (ms) of buckets 0-38: ``ceil(1.5 ** i)``, written out (the Lua helper
#: holds the same list, which a test compares).
BOUNDS: Final[tuple[int, ...]] = (
    1, 2, 3, 4, 6, 8, 12, 18, 26, 39, 58, 87, 130, 195, 292, 438, 657, 986, 1478, 2217,
    3326, 4988, 7482, 11223, 16835, 25252, 37877, 56816, 85223, 127835, 191752, 287627,
    431440, 647160, 970740, 1456110, 2184165, 3276247, 4914370,
)  # fmt: skip
#: Buckets in all: one per bound, and the open one over the last bound.
BUCKETS: Final = len(BOUNDS) + 1
#: Minutes per slot; a slot is named by its first minute, ``YYYYMMDDHHM0`` (UTC).
SLOT_MINUTES: Final = 10
#: Seconds a slot's hash is kept after its last new field: 25 hours, more than the day
#: window's 24 h 10 min.
SLOT_TTL: Final = 90_000
#: The windows a read sums, in slots (the current one included).
Window = Literal["hour", "day"]
SLOTS: Final[dict[str, int]] = {"hour": 7, "day": 145}
#: The most attempts one bucket may report: a counter beyond it (written by others) is
#: garbage and reads as 0.
COUNT_MAX: Final = 2**53
_DIGITS: Final = re.compile("[0-9]+")


def bucket_of(ms: float) -> int:
    """The bucket of a run time in ms (0 for 1 ms and less, ``BUCKETS - 1`` beyond the
    last bound), as ``lua/_runtimes.lua`` places it."""
    lo, hi = 0, len(BOUNDS)
    while lo < hi:
        mid = (lo + hi) // 2
        if ms <= BOUNDS[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def slot_of(when: datetime) -> str:
    """The name of the UTC slot that holds ``when``: its first minute, ``YYYYMMDDHHM0``."""
    t = when.astimezone(UTC)
    return t.strftime("%Y%m%d%H") + f"{t.minute // SLOT_MINUTES}0"


def slots(window: Window, at: float) -> list[str]:
    """The slots of ``window`` up to the one holding ``at`` (epoch seconds), oldest
    first."""
    now = datetime.fromtimestamp(at, UTC)
    step = timedelta(minutes=SLOT_MINUTES)
    n = SLOTS[window]
    return [slot_of(now - step * i) for i in range(n - 1, -1, -1)]


def read_counts(rows: Iterable[Sequence[object]]) -> list[int]:
    """Add up rows of ``HMGET`` replies of the fields ``0``..``39`` (one row per slot
    and shard). A value that is no whole number from 0 to 2^53 in digits alone (text,
    NaN, a negative count, 1e300, " 5", written by others) counts as 0."""
    total = [0] * BUCKETS
    for row in rows:
        for i, raw in enumerate(row[:BUCKETS]):
            total[i] += _count(raw)
    return total


def _count(raw: object) -> int:
    # digits alone, as lua/run_times.lua reads them (int() would also take " 5", "+5"
    # and "1_0", none of which HINCRBY writes)
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    if isinstance(raw, int):
        raw = str(raw)
    if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
        return 0
    n = int(raw)
    return n if n <= COUNT_MAX else 0


def percentile(counts: Sequence[int], pct: int) -> int | None:
    """The bucket holding the ``pct`` percentile (1-100) of the attempts ``counts``
    holds: the nearest rank, ``ceil(pct * n / 100)``, in whole numbers; None when it
    holds none."""
    n = sum(counts)
    if n == 0:
        return None
    rank, seen = max(1, -(-pct * n // 100)), 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return i
    return len(counts) - 1
