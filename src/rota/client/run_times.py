"""The operator's read of a job name's run times: percentiles and a histogram over the
last hour or day, from the counters the finish script keeps per name and ten-minute
slot (:mod:`rota.protocol.run_times`). Each shard counts the attempts it finished; a
read asks every shard for the window's slots (one pipeline each, at once) and adds
them up.

Which attempts count: every attempt that ran to an outcome of its handler's
(complete, retried, dead, dropped; a timeout is a failure and counts at the time it
was cut), from its lease's start to its finish, isolated handlers' alike. An attempt an
abort or a shutdown cut short counts no run time, nor does one whose lease was lost.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, get_args

import msgspec
from msgspec import Meta

from rota.client.workflow import pipelined
from rota.protocol.job import validate_name
from rota.protocol.run_times import (
    BOUNDS,
    BUCKETS,
    SLOTS,
    Window,
    percentile,
    read_counts,
    slots,
)

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = ["HistogramBucket", "RunTimes", "RunTimesAdmin", "run_times_of"]

#: The fields a slot's hash holds: the bucket indexes.
_FIELDS = tuple(str(i) for i in range(BUCKETS))
_Ms = Annotated[int, Meta(ge=0, le=BOUNDS[-1])] | None


class HistogramBucket(msgspec.Struct, frozen=True):
    """The attempts that ran more than the previous bucket's ``le_ms`` and at most
    ``le_ms`` ms (None: the open bucket, over the last bound)."""

    le_ms: _Ms
    count: Annotated[int, Meta(ge=0)]


class RunTimes(msgspec.Struct, frozen=True):
    """A job name's run times over ``window``. Each percentile is the upper bound (ms)
    of the bucket that holds it: never below the true value, and less than 1.5 times it
    (exact up to 4 ms); None when no attempt counted (``count`` 0) or when it falls in
    the open bucket (over :data:`rota.protocol.run_times.BOUNDS`'s last, about 82
    minutes). ``max_ms``: the upper bound of the slowest bucket that counted one."""

    name: str
    window: Window
    count: Annotated[int, Meta(ge=0)]
    p50_ms: _Ms
    p95_ms: _Ms
    p99_ms: _Ms
    max_ms: _Ms
    buckets: list[HistogramBucket]


def _bound(bucket: int | None) -> int | None:
    return BOUNDS[bucket] if bucket is not None and bucket < len(BOUNDS) else None


def run_times_of(name: str, window: Window, counts: list[int]) -> RunTimes:
    """The figures of a histogram's counts (one per bucket)."""
    slowest = max((i for i, c in enumerate(counts) if c), default=None)
    return RunTimes(
        name,
        window,
        sum(counts),
        _bound(percentile(counts, 50)),
        _bound(percentile(counts, 95)),
        _bound(percentile(counts, 99)),
        _bound(slowest),
        [HistogramBucket(_bound(i), c) for i, c in enumerate(counts)],
    )


async def _shard_rows(shard: Shard, name: str, names: list[str]) -> list[list[object]]:
    """The slots' counters in one shard, one ``HMGET`` each in one round trip (a key of
    another type, written by others, reads as empty)."""
    k = shard.keys
    rows = await shard.piped(
        lambda p: [p.hmget(k.run_times(name, s), _FIELDS) for s in names], errors=False
    )
    return [list(pipelined(r) or ()) for r in rows]


class RunTimesAdmin:
    """The run-time read of :class:`~rota.client.admin.Admin` (a mixin: it needs the
    admin's routing table, ``_route``)."""

    _route: Shards

    async def run_times(
        self, name: str, window: Window = "hour", *, at: float | None = None
    ) -> RunTimes:
        """Percentiles and histogram of ``name``'s run times over the last ``window``
        (``"hour"``: 60 to 70 minutes; ``"day"``: 24 h to 24 h 10 min; see the module),
        added up over every shard. ``at``: the present, in epoch seconds."""
        if window not in get_args(Window):
            raise ValueError(f"window: 'hour' or 'day', not {window!r}")
        return (await self._read(name, (window,), at))[0]

    async def run_times_windows(self, name: str, *, at: float | None = None) -> list[RunTimes]:
        """:meth:`run_times` of the hour and of the day, from one read of the day's
        slots (one round trip per shard)."""
        return await self._read(name, get_args(Window), at)

    async def _read(
        self, name: str, windows: tuple[Window, ...], at: float | None
    ) -> list[RunTimes]:
        validate_name(name)
        widest = max(windows, key=lambda w: SLOTS[w])
        names = slots(widest, time.time() if at is None else at)
        each = await self._route.each(lambda s: _shard_rows(s, name, names))
        return [
            run_times_of(name, w, read_counts(r for rows in each for r in rows[-SLOTS[w] :]))
            for w in windows
        ]
