"""Reads of the dashboard's, /queues' and a queue page's figures that stay cheap with
thousands of job names: the stats hashes hold three fields per name and minute
(``processed:<name>``, ``failed:<name>``, ``ms:<name>``, see docs/protocol.md), so these
ask for the fields they show (HMGET), never for the whole hash, in one round trip; the
dashboard's totals count one figure per name, not every figure of every queue, and the
running jobs are read from the names that may hold leases only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from rota.client.admin_reads import leased_names, queue_totals, stats_fields, stats_totals
from rota.client.status import Bucket, History

if TYPE_CHECKING:
    from rota.client import Client

__all__ = [
    "MINUTES",
    "TOTALS",
    "done_last_minutes",
    "leased_names",
    "name_minutes",
    "queue_totals",
    "stats_totals",
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
        for t, row in zip(starts, await stats_fields(client, names, TOTALS), strict=True)
    ]
    return History(buckets[:minutes], buckets[minutes:])


async def name_minutes(
    client: Client, name: str, minutes: int = MINUTES, *, at: float | None = None
) -> list[Bucket]:
    """The last ``minutes`` UTC minutes of job name ``name`` (``at``: the present, epoch
    seconds), each counting ``processed``, ``failed`` and ``ms`` (its complete jobs' run
    time, summed)."""
    starts = _minutes(at, minutes)
    rows = await stats_fields(
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
    previous, current = await stats_fields(client, buckets, [f"processed:{n}" for n in names])
    return dict(zip(names, previous, strict=True)), dict(zip(names, current, strict=True))
