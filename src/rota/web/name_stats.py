"""One job name's figures per UTC minute: processed, failed and the mean run time of its
complete jobs, as its queue's page charts them and ``/api/queues/{name}/stats`` sends
them.

Read from the per-minute stats hashes (``processed:<name>``, ``failed:<name>`` and
``ms:<name>``, see docs/protocol.md): three fields of each minute by HMGET, in one round
trip, whatever the number of names the hashes hold.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Annotated, Final

import msgspec
from msgspec import Meta

from rota.client import Client
from rota.protocol.job import field_int
from rota.web.body_times import Ms

__all__ = ["MINUTES", "NameMinute", "NameStats", "name_stats"]

#: Minutes a page charts by default; the hashes are kept 2 hours.
MINUTES: Final = 60


class NameMinute(msgspec.Struct):
    """One UTC minute of a job name."""

    start: Ms
    processed: Annotated[int, Meta(description="jobs of the name completed")]
    failed: Annotated[int, Meta(description="failed attempts of the name")]
    ran_ms: Annotated[int, Meta(description="ms its complete jobs ran, summed")]
    mean_ms: Annotated[
        float | None, Meta(description="mean run time of its complete jobs (none: none)")
    ]


class NameStats(msgspec.Struct):
    """A job name's minutes, oldest first; the last one is the current minute."""

    name: str
    minutes: list[NameMinute]


async def name_stats(
    client: Client, name: str, minutes: int = MINUTES, *, at: float | None = None
) -> NameStats:
    """The last ``minutes`` UTC minutes of ``name`` (``at``: the present, epoch seconds)."""
    now = dt.datetime.fromtimestamp(time.time() if at is None else at, dt.UTC)
    last = now.replace(second=0, microsecond=0)
    starts = [last - dt.timedelta(minutes=i) for i in range(minutes - 1, -1, -1)]
    fields = (f"processed:{name}", f"failed:{name}", f"ms:{name}")
    pipe = client.redis.pipeline(transaction=False)
    for t in starts:
        pipe.hmget(client.keys.stats_bucket(t.strftime("%Y%m%d%H%M")), fields)
    rows = await pipe.execute()
    out = []
    for t, row in zip(starts, rows, strict=True):
        done, failed, ran = (field_int(v) for v in row)
        mean = round(ran / done, 1) if done else None
        out.append(NameMinute(round(t.timestamp() * 1000), done, failed, ran, mean))
    return NameStats(name, out)
