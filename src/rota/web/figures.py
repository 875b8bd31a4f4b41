"""Reads of the dashboard's and /queues' figures that stay cheap with thousands of job
names: the stats hashes hold three fields per name and minute (``processed:<name>``,
...), so these ask for the fields they show (HMGET), never for the whole hash, and the
dashboard's totals count one figure per name, not every figure of every queue, and the
running jobs are read from the names that may hold leases only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from rota.client import Client
from rota.protocol.job import field_int, reply_text
from rota.status import Bucket, History

__all__ = ["TOTALS", "done_last_minutes", "leased_names", "queue_totals", "totals_history"]

#: The fields of each bucket the dashboard charts.
TOTALS = ("processed", "failed")


async def totals_history(
    client: Client, minutes: int = 60, days: int = 30, *, at: float | None = None
) -> History:
    """:meth:`Client.history` with only :data:`TOTALS` in each bucket, in one round trip
    of one HMGET per bucket (the whole hash of a busy minute holds thousands of fields)."""
    now = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    minute = now.replace(second=0, microsecond=0)
    day = minute.replace(hour=0, minute=0)
    starts = [minute - timedelta(minutes=i) for i in range(minutes - 1, -1, -1)]
    starts += [day - timedelta(days=i) for i in range(days - 1, -1, -1)]
    pipe = client.redis.pipeline(transaction=False)
    for i, t in enumerate(starts):
        bucket = t.strftime("%Y%m%d%H%M" if i < minutes else "%Y%m%d")
        pipe.hmget(client.keys.stats_bucket(bucket), TOTALS)
    rows = await pipe.execute()
    buckets = [
        Bucket(t.timestamp(), {f: field_int(v) for f, v in zip(TOTALS, row, strict=True) if v})
        for t, row in zip(starts, rows, strict=True)
    ]
    return History(buckets[:minutes], buckets[minutes:])


async def done_last_minutes(
    client: Client, names: list[str], at: float
) -> tuple[dict[str, int], dict[str, int]]:
    """Jobs of each of ``names`` completed in the minute before ``at``'s and in its own:
    two HMGETs of the names' fields."""
    minute = datetime.fromtimestamp(at, UTC).replace(second=0, microsecond=0)
    if not names:
        return {}, {}
    fields = [f"processed:{n}" for n in names]
    pipe = client.redis.pipeline(transaction=False)
    for t in (minute - timedelta(minutes=1), minute):
        pipe.hmget(client.keys.stats_bucket(t.strftime("%Y%m%d%H%M")), fields)
    previous, current = await pipe.execute()
    return (
        {n: field_int(v) for n, v in zip(names, previous, strict=True)},
        {n: field_int(v) for n, v in zip(names, current, strict=True)},
    )


async def leased_names(client: Client) -> list[str]:
    """The job names whose running set may hold leases (``Keys.leased``: the fetch that
    leases a job adds its name): the only running sets worth reading."""
    return sorted(reply_text(n) for n in await client.redis.smembers(client.keys.leased))


async def queue_totals(client: Client) -> tuple[int, int]:
    """Jobs queued, over every job name (one figure per name), and jobs running, over
    the names that may hold leases."""
    names = await client.names()
    leased = await leased_names(client)
    pipe = client.redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(client.keys.queue(name))
    for name in leased:
        pipe.zcard(client.keys.running(name))
    counts = await pipe.execute() if names or leased else []
    return sum(counts[: len(names)]), sum(counts[len(names) :])
