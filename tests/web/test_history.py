"""``Client.history``: the per-minute and per-day stats buckets the dashboard draws."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
import redis

from rota import Client
from tests.web.live import Seeded


def _s(t: dt.datetime) -> float:
    return t.timestamp()


async def test_buckets_line_up_with_utc_minutes_and_days(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    now = dt.datetime(2031, 3, 1, 0, 1, 30, tzinfo=dt.UTC)  # just after midnight UTC
    key = "{" + namespace + "}:stats:"
    redis_sync.hset(key + "203103010001", mapping={"processed": 7, "failed": 1, "processed:a": 7})
    redis_sync.hset(key + "203102282359", mapping={"processed": 3})
    redis_sync.hset(key + "203102282358", mapping={"failed": 2, "junk": "not a number"})
    redis_sync.hset(key + "20310301", mapping={"processed": 7})
    redis_sync.hset(key + "20310228", mapping={"processed": 40, "failed": 5})
    redis_sync.hset(key + "20310131", mapping={"processed": 99})  # 29 days earlier: left out

    history = await client.admin.history(minutes=3, days=29, at=now.timestamp())

    assert [b.start for b in history.minutes] == [
        _s(dt.datetime(2031, 2, 28, 23, 59, tzinfo=dt.UTC)),
        _s(dt.datetime(2031, 3, 1, 0, 0, tzinfo=dt.UTC)),
        _s(dt.datetime(2031, 3, 1, 0, 1, tzinfo=dt.UTC)),
    ]
    assert [b.counts for b in history.minutes] == [
        {"processed": 3},
        {},
        {"processed": 7, "failed": 1, "processed:a": 7},
    ]
    assert len(history.days) == 29
    assert history.days[-1].start == _s(dt.datetime(2031, 3, 1, tzinfo=dt.UTC))
    assert history.days[-1].counts == {"processed": 7}
    assert history.days[-2].counts == {"processed": 40, "failed": 5}
    assert history.days[0].start == _s(dt.datetime(2031, 2, 1, tzinfo=dt.UTC))
    assert all(b.counts == {} for b in history.days[:-2])

    wider = await client.admin.history(minutes=4, days=0, at=now.timestamp())
    assert wider.minutes[0].counts == {"failed": 2}  # the field that is not a number is skipped
    assert wider.days == []


async def test_history_counts_what_pools_did(client: Client, seeded: Seeded) -> None:
    history = await client.admin.history()
    assert (len(history.minutes), len(history.days)) == (60, 30)
    recent = history.minutes[-2:]
    assert sum(b.counts.get("processed", 0) for b in recent) == len(seeded.complete)
    assert sum(b.counts.get("processed:ok", 0) for b in recent) == len(seeded.complete)
    assert sum(b.counts.get("failed", 0) for b in history.days[-2:]) == 8
    starts = [b.start for b in history.minutes]
    assert starts == sorted(starts) and {b - a for a, b in itertools.pairwise(starts)} == {60.0}


async def test_history_rejects_negative_spans(client: Client) -> None:
    with pytest.raises(ValueError, match="minutes and days must not be negative"):
        await client.admin.history(minutes=-1)
