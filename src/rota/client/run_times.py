"""The operator's read of a job name's run times: percentiles and a histogram over the
last hour or day, from the counters the finish script keeps per name and ten-minute
slot (:mod:`rota.protocol.run_times`), as the methods of :class:`RunTimeReads`
(``client.admin.run_times``). Each shard counts the attempts it finished; a
read asks every shard for the window's slots (one pipeline each, at once) and adds
them up.

Which attempts count: every attempt that ran to an outcome of its handler's
(complete, retried, dead, dropped; a timeout is a failure and counts at the time it
was cut), from its lease's start to its finish, isolated handlers' alike. An attempt an
abort or a shutdown cut short counts no run time, nor does one whose lease was lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, get_args

import msgspec
from msgspec import Meta

from rota.client.workflow import pipelined
from rota.protocol import read_calls
from rota.protocol.job import reply_text, validate_name
from rota.protocol.run_times import (
    BOUNDS,
    BUCKETS,
    SLOTS,
    Window,
    percentile,
    read_counts,
    slots,
)
from rota.wire.conn import hash_pairs

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = ["HistogramBucket", "RunTimeReads", "RunTimes", "run_times_of", "shard_run_times"]

#: The fields a slot's hash holds, the bucket indexes, by their text.
_BUCKET_OF = {str(i): i for i in range(BUCKETS)}
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


async def shard_run_times(
    shard: Shard, names: Sequence[str], slot_names: list[str]
) -> list[list[int]]:
    """The bucket counts of each of ``names`` over ``slot_names`` in one shard: one call
    of the read-only function ``run_times`` (``lua/run_times.lua``), which adds up the
    slots in the shard and answers a short row a name, where the server runs it for this
    user; else the slots read by plain commands (:func:`_shard_rows`) and added up here.
    The same figures either way."""
    found = await read_calls.run_times(shard.scope.on(shard.conn), slot_names, names)
    if found is None:
        return [read_counts(rows) for rows in await _shard_rows(shard, names, slot_names)]
    return [[f.get(b, 0) for b in range(BUCKETS)] for f in found]


def _added(counts: Iterable[list[int]]) -> list[int]:
    """Bucket counts of several shards, added up."""
    return [sum(c) for c in zip(*counts, strict=True)]


async def _shard_rows(
    shard: Shard, names: Sequence[str], slot_names: list[str]
) -> list[list[list[object]]]:
    """The slots' counters of each of ``names`` in one shard, one ``HGETALL`` a name
    and slot, all in one round trip on its bare connection (a slot that counted nothing
    is no key, and answers an empty reply): per name, a row per slot, indexed by
    bucket. A key of another type, written by others, reads as empty."""
    k = shard.keys
    reads = [("HGETALL", k.run_times(name, s)) for name in names for s in slot_names]
    replies = iter(await shard.conn.execute_many(reads))
    return [[_row(next(replies)) for _ in slot_names] for _ in names]


def _row(reply: object) -> list[object]:
    """An ``HGETALL`` reply of a slot (a flat list from a bare connection, a dict from
    redis-py) as the values of the fields ``0``..``39`` in order, None where absent:
    what an ``HMGET`` of those fields answers, a field of another name left out; no
    key (most slots of most names) is no row at all, which counts the same and costs
    the sum nothing."""
    if not reply:  # no key (an error reply is an exception, which is true)
        return []
    found = pipelined(reply)
    if not found:
        return []
    row: list[object] = [None] * BUCKETS
    for field, value in hash_pairs(found):
        i = _BUCKET_OF.get(reply_text(field))
        if i is not None:
            row[i] = value
    return row


class RunTimeReads:
    """The run-time reads of a namespace's job names (``client.admin.run_times``, see
    the module), over the shards of ``route``."""

    def __init__(self, route: Shards) -> None:
        self._route = route

    async def of(self, name: str, window: Window = "hour", *, at: float | None = None) -> RunTimes:
        """Percentiles and histogram of ``name``'s run times over the last ``window``
        (``"hour"``: 60 to 70 minutes; ``"day"``: 24 h to 24 h 10 min; see the module),
        added up over every shard. ``at``: the present, in epoch seconds."""
        return (await self._read(name, (_checked(window),), at))[0]

    async def windows(self, name: str, *, at: float | None = None) -> list[RunTimes]:
        """:meth:`of` the hour and of the day, from one read of the day's slots (one
        round trip per shard)."""
        return await self._read(name, get_args(Window), at)

    async def of_names(
        self, names: Sequence[str], window: Window = "hour", *, at: float | None = None
    ) -> list[RunTimes]:
        """:meth:`of` each of ``names``, in that order, read in one round trip per shard
        whatever their number (what ``/metrics?run_times=`` details): where the server
        runs functions, added up in each shard by the read-only function ``run_times``."""
        _checked(window)
        for name in names:
            validate_name(name)
        slot_names = slots(window, time.time() if at is None else at)
        each = await self._route.each(lambda s: shard_run_times(s, names, slot_names))
        return [run_times_of(n, window, _added(s[i] for s in each)) for i, n in enumerate(names)]

    async def _read(
        self, name: str, windows: tuple[Window, ...], at: float | None
    ) -> list[RunTimes]:
        widest = max(windows, key=lambda w: SLOTS[w])
        each = await self._rows([name], widest, at)
        return [run_times_of(name, w, _summed(each, 0, w)) for w in windows]

    async def _rows(
        self, names: Sequence[str], window: Window, at: float | None
    ) -> list[list[list[list[object]]]]:
        """Every shard's rows of ``names`` over ``window``: per shard, per name, a row
        per slot, oldest first."""
        for name in names:
            validate_name(name)
        slot_names = slots(window, time.time() if at is None else at)
        return await self._route.each(lambda s: _shard_rows(s, names, slot_names))


def _checked(window: Window) -> Window:
    """``window`` as given, or a ValueError that names the two there are."""
    if window not in get_args(Window):
        raise ValueError(f"window: 'hour' or 'day', not {window!r}")
    return window


def _summed(each: list[list[list[list[object]]]], i: int, window: Window) -> list[int]:
    """The bucket counts of the ``i``-th name read over ``window``'s slots (the last
    of those read), added up over the shards."""
    return read_counts(r for shard in each for r in shard[i][-SLOTS[window] :])
