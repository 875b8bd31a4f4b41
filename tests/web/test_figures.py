"""The dashboard's and /queues' figures with thousands of job names: the stats hashes
hold three fields per name and minute, and these pages read the fields they show, never
a whole hash of a minute or a day, nor every figure of every queue."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import redis

from rota import Client
from tests.helpers import lease_tokens


def _calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def test_the_dashboard_reads_the_totals_of_each_bucket_only(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    names = [f"n{i}" for i in range(300)]
    for name in names[:3]:
        await client.enqueue(name)
    await client.enqueue("n7")
    (leased,) = await lease_tokens(client, "n7", 1)  # a job running, as a pool leases it
    minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    key = client.admin.shards[0].keys.stats_bucket(minute.strftime("%Y%m%d%H%M"))
    fields = {"processed": 600, "failed": 30}
    for name in names:
        fields |= {f"processed:{name}": 2, f"failed:{name}": 0, f"ms:{name}": 40}
    redis_sync.hset(key, mapping=fields)  # type: ignore[arg-type]
    day = client.admin.shards[0].keys.stats_bucket(minute.strftime("%Y%m%d"))
    redis_sync.hset(day, mapping=fields)  # type: ignore[arg-type]
    redis_sync.config_resetstat()
    data = (await http.get("/api/dashboard")).json()
    calls = _calls(redis_sync)
    assert data["minutes"][-1]["processed"] == 600 and data["minutes"][-1]["failed"] == 30
    assert data["days"][-1]["processed"] == 600
    assert data["sizes"]["queued"] == 3 and data["sizes"]["running"] == 1
    assert calls.get("hgetall", 0) <= 1  # the totals since the start, one hash
    assert calls["hmget"] >= 90  # 60 minutes and 30 days, two fields each
    assert calls.get("lindex", 0) == 0  # not every figure of every queue
    assert calls["zcard"] <= 5  # the running sets of the names that may hold leases

    for path in ("/api/busy", "/api/pools"):
        redis_sync.config_resetstat()
        assert (await http.get(path)).status_code == 200
        # the live pools' index, and the one running set that may hold leases (not 300)
        assert _calls(redis_sync).get("zrange", 0) <= 2, path
    assert [j["job_id"] for j in (await http.get("/api/busy")).json()["workers"]] == [leased]

    redis_sync.config_resetstat()
    page = (await http.get("/api/queues", params={"limit": 2})).json()
    assert [q["name"] for q in page["queues"]] == ["n0", "n1"]
    assert page["queues"][0]["done_per_second"] == round(2 / 60, 2)  # this minute's 2
    assert _calls(redis_sync).get("hgetall", 0) == 0
