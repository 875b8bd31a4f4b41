"""What ``/shards`` and ``/metrics`` cost with many job names, counted in Redis commands
(``INFO commandstats``, those a function runs included; never in time): a shard's view
counts each name's jobs with two commands inside the read-only function ``backlog``
(its queue's length and its count of keyed jobs; its running set only where it may hold
leases), not every figure of every queue; a scrape ranks the names with those and
details the :data:`~rota.web.metrics.NAMES` with the most jobs, so its size does not
grow with the names, unless ``?names=all`` asks for every one."""

from __future__ import annotations

import re
from typing import Any

import httpx
import redis

from rota import Client, JobSpec
from rota.web.metrics import NAMES


def _calls(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


async def _names(client: Client, start: int, stop: int) -> None:
    """One queued job for each of the names ``n<start>`` .. ``n<stop - 1>``."""
    await client.enqueue_many([JobSpec(name=f"n{i:04d}") for i in range(start, stop)])


async def _cost(http: httpx.AsyncClient, r: redis.Redis, path: str) -> tuple[int, str]:
    r.config_resetstat()
    answer = await http.get(path)
    assert answer.status_code == 200, answer.text
    return _calls(r), answer.text


async def test_the_shards_view_reads_two_commands_a_name(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    await _names(client, 0, 100)
    first, _ = await _cost(http, redis_sync, "/api/shards")
    await _names(client, 100, 400)
    second, text = await _cost(http, redis_sync, "/api/shards")
    # 300 names more, each with a job: an LLEN and an HGET of each inside the function
    # (it was 8 sent and more, then 3, then about one sent: a ZCARD of a running set no
    # fetch leased into, an HGET of a name that never had keyed jobs)
    assert second - first <= (2 * 300 + 8) * len(client.admin.shards), (first, second)
    shards = httpx.Response(200, text=text).json()["shards"]
    assert sum(s["queued"] for s in shards) == 400


def _named(text: str) -> set[str]:
    return set(re.findall(r'^rota_queue_size\{[^}]*name="([^"]+)"', text, re.M))


async def test_a_scrape_details_the_names_with_the_most_jobs_only(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    await _names(client, 0, NAMES + 50)
    # the last name by its text, and the one with the most jobs
    await client.enqueue_many([JobSpec(name="zz-big") for _ in range(3)])
    first, text = await _cost(http, redis_sync, "/metrics")
    named = _named(text)
    assert len(named) == NAMES and "zz-big" in named, sorted(named)
    # every series of a name is one of the detailed ones
    assert set(re.findall(r'name="([^"]+)"', text)) == named
    assert re.search(r"^rota_queued_jobs\{[^}]*\} 153\.0$", text, re.M), text[-2000:]
    assert re.search(rf"^rota_job_names\{{[^}}]*\}} {NAMES + 51}\.0$", text, re.M)
    await _names(client, NAMES + 50, NAMES + 350)
    second, more = await _cost(http, redis_sync, "/metrics")
    assert len(_named(more)) == NAMES
    assert abs(len(more) - len(text)) < 200  # the same series, another count or two
    assert second - first <= (2 * 300 + 8) * len(client.admin.shards), (first, second)
    every = (await http.get("/metrics", params={"names": "all"})).text
    assert len(_named(every)) == NAMES + 351
    refused = await http.get("/metrics", params={"names": "some"})
    assert refused.status_code == 400 and refused.json()["error"].startswith("names: ")
