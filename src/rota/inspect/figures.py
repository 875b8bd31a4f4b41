"""Reads of the dashboard's, /queues' and a queue page's figures that stay cheap with
thousands of job names: the stats hashes hold three fields per name and minute
(``processed:<name>``, ``failed:<name>``, ``ms:<name>``, see docs/protocol.md), so these
ask for the fields they show (HMGET), never for the whole hash, in one round trip; the
dashboard's totals count one figure per name, not every figure of every queue, and the
running jobs are read from the names that may hold leases only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from rota.client.rules import gather
from rota.client.status import Bucket, History
from rota.protocol.job import field_int, reply_text

if TYPE_CHECKING:
    from rota.client import Client, Shard

__all__ = [
    "MINUTES",
    "TOTALS",
    "done_last_minutes",
    "leased_names",
    "name_minutes",
    "queue_totals",
    "totals_history",
]

#: The fields of each bucket the dashboard charts.
TOTALS: Final = ("processed", "failed")
#: Minutes a queue's page charts by default; the hashes are kept 2 hours.
MINUTES: Final = 60


def _minutes(at: float | None, count: int) -> list[datetime]:
    """The starts of the ``count`` UTC minutes up to ``at``'s (None: now), oldest first."""
    now = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    last = now.replace(second=0, microsecond=0)
    return [last - timedelta(minutes=i) for i in range(count - 1, -1, -1)]


async def _fields(client: Client, buckets: list[str], fields: Sequence[str]) -> list[list[int]]:
    """``fields`` of each stats bucket (``YYYYmmddHHMM`` or ``YYYYmmdd``), one HMGET
    each, added up over every shard (each counts the jobs it ran)."""
    if len(client.admin.shards) == 1:
        return await _shard_fields(client.admin.shards[0], buckets, fields)
    each = await gather(
        [functools.partial(_shard_fields, part, buckets, fields) for part in client.admin.shards]
    )
    return [[sum(vs) for vs in zip(*rows, strict=True)] for rows in zip(*each, strict=True)]


async def _shard_fields(
    client: Shard, buckets: list[str], fields: Sequence[str]
) -> list[list[int]]:
    """:func:`_fields` of one shard."""
    pipe = client.redis.pipeline(transaction=False)
    for bucket in buckets:
        pipe.hmget(client.keys.stats_bucket(bucket), fields)
    rows = await pipe.execute() if buckets else []
    return [[field_int(v) for v in row] for row in rows]


async def totals_history(
    client: Client, minutes: int = 60, days: int = 30, *, at: float | None = None
) -> History:
    """:meth:`Client.history` with only :data:`TOTALS` in each bucket (the whole hash of
    a busy minute holds thousands of fields)."""
    starts = _minutes(at, minutes)
    day = starts[-1].replace(hour=0, minute=0)
    starts += [day - timedelta(days=i) for i in range(days - 1, -1, -1)]
    names = [t.strftime("%Y%m%d%H%M" if i < minutes else "%Y%m%d") for i, t in enumerate(starts)]
    buckets = [
        Bucket(t.timestamp(), {f: v for f, v in zip(TOTALS, row, strict=True) if v})
        for t, row in zip(starts, await _fields(client, names, TOTALS), strict=True)
    ]
    return History(buckets[:minutes], buckets[minutes:])


async def name_minutes(
    client: Client, name: str, minutes: int = MINUTES, *, at: float | None = None
) -> list[Bucket]:
    """The last ``minutes`` UTC minutes of job name ``name`` (``at``: the present, epoch
    seconds), each counting ``processed``, ``failed`` and ``ms`` (its complete jobs' run
    time, summed)."""
    starts = _minutes(at, minutes)
    rows = await _fields(
        client,
        [t.strftime("%Y%m%d%H%M") for t in starts],
        (f"processed:{name}", f"failed:{name}", f"ms:{name}"),
    )
    return [
        Bucket(t.timestamp(), dict(zip(("processed", "failed", "ms"), row, strict=True)))
        for t, row in zip(starts, rows, strict=True)
    ]


async def done_last_minutes(
    client: Client, names: list[str], at: float
) -> tuple[dict[str, int], dict[str, int]]:
    """Jobs of each of ``names`` completed in the minute before ``at``'s and in its own."""
    if not names:
        return {}, {}
    buckets = [t.strftime("%Y%m%d%H%M") for t in _minutes(at, 2)]
    previous, current = await _fields(client, buckets, [f"processed:{n}" for n in names])
    return dict(zip(names, previous, strict=True)), dict(zip(names, current, strict=True))


async def leased_names(client: Client) -> list[str]:
    """The job names whose running set may hold leases (``Keys.leased``: the fetch that
    leases a job adds its name): the only running sets worth reading. Over every
    shard."""
    each = await gather(
        [functools.partial(part.redis.smembers, part.keys.leased) for part in client.admin.shards]
    )
    return sorted({reply_text(n) for names in each for n in names})


async def queue_totals(client: Client) -> tuple[int, int]:
    """Jobs queued, over every job name (one figure per name), and jobs running, over
    the names that may hold leases: added up over every shard."""
    names = await client.admin.names()
    each = await gather(
        [functools.partial(_shard_totals, part, names) for part in client.admin.shards]
    )
    return sum(q for q, _ in each), sum(r for _, r in each)


async def _shard_totals(client: Shard, names: list[str]) -> tuple[int, int]:
    """:func:`queue_totals` of one shard, over the names its own running sets lease."""
    leased = [reply_text(n) for n in await client.redis.smembers(client.keys.leased)]
    pipe = client.redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(client.keys.queue(name))
    for name in leased:
        pipe.zcard(client.keys.running(name))
    counts = await pipe.execute() if names or leased else []
    return sum(counts[: len(names)]), sum(counts[len(names) :])
