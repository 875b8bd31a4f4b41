"""What ``/shards`` and ``/metrics`` cost at 5,000 job names, over one shard and over 4
on one server, counted in Redis commands (``INFO commandstats``, those a function runs
included), never in time; what a scrape holds (its size bounded whatever the number of
names, the series it exports, every name when asked).

A shard's view and a scrape's ranking count every name's jobs in one call of the
read-only function ``backlog`` a shard: inside it, two commands a name the shard holds
(its queue's length, its keyed count) and the size of its running set where it may hold
leases; what the web server sends and reads does not grow with the names (see
test_names_round_trips). A scrape reads every figure of the
:data:`~rota.web.metrics.NAMES` it details. Before, a name cost three commands sent in
every shard (60,000 for a view of 5,000 names over 4 shards), then about one, and a
scrape read the whole counters' hash (five fields a name) and each detailed name's fair
keys one by one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from rota import Client, JobSpec
from rota.client.fair_top import CANDIDATES
from rota.web import create_app
from rota.web.metrics import COUNTERS, KEYS, NAMES
from tests.helpers import pool_settings

WEB_MD = Path(__file__).parents[2] / "docs" / "web.md"
NAMES_AT_SCALE = 5000

#: Every metric family of a scrape (without ``?keys=top``), as docs/web.md lists them.
SERIES = {
    "rota_queue_size",
    "rota_queue_latency_seconds",
    "rota_queue_running",
    "rota_queue_paused",
    *(f"rota_jobs_{c}" for c in COUNTERS),
    *(f"rota_namespace_jobs_{c}" for c in COUNTERS),
    "rota_jobs_in_set",
    "rota_pools",
    "rota_workers",
    "rota_busy_workers",
    "rota_queued_jobs",
    "rota_job_names",
    "rota_redis_roundtrip_seconds",
    "rota_scrape_duration_seconds",
    "rota_redis_refusing_writes",
    "rota_redis_memory_used_bytes",
    "rota_redis_memory_max_bytes",
}
#: The families ``?keys=top`` adds.
KEY_SERIES = {"rota_fair_key_queued", "rota_fair_key_running"}


@dataclass
class Scale:
    """5,000 job names over ``k`` shards on one server, the app over them, and the
    server's command counter."""

    client: Client
    http: httpx.AsyncClient
    r: redis.Redis

    @property
    def k(self) -> int:
        return len(self.client.admin.shards)

    async def cost(self, path: str) -> tuple[int, str]:
        """The commands Redis ran to answer ``GET path``, and the answer."""
        self.r.config_resetstat()
        answer = await self.http.get(path)
        assert answer.status_code == 200, answer.text
        stats: dict[str, Any] = self.r.info("commandstats")
        return sum(int(v["calls"]) for v in stats.values()), answer.text

    async def held(self) -> int:
        """The job names each shard holds, added up over the shards."""
        return sum([await s.redis.scard(s.keys.names) for s in self.client.admin.shards])


@pytest.fixture(params=[1, 4], ids=["K=1", "K=4"])
async def many(
    request: pytest.FixtureRequest, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> AsyncIterator[Scale]:
    """5,000 job names, a job queued of each (and 3 more of the last), one with 20
    keyed jobs over 20 fair keys, over ``K`` shards on one server."""
    shards: int = request.param
    client = Client.from_url(redis_url, namespace, shards=shards)
    names = [f"n{i:04d}" for i in range(NAMES_AT_SCALE)]
    await client.enqueue_many([JobSpec(name=n) for n in names + ["n4999"] * 3])
    await client.enqueue_many([JobSpec(name="n0007", fair_key=f"t{i}") for i in range(20)])
    app = create_app(pool_settings(redis_url, namespace, shards=shards), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield Scale(client, http, redis_sync)
    await client.close()


async def test_the_shards_view_reads_two_commands_a_name_a_shard_holds(many: Scale) -> None:
    k = many.k
    calls, text = await many.cost("/api/shards")
    # inside the function, LLEN and HGET of each name a shard holds (no running set:
    # nothing is leased), and a few commands a shard (the call, its names, its leased
    # names, its sets' sizes)
    held = await many.held()
    assert calls <= 2 * held + 12 * k, calls
    shards = httpx.Response(200, text=text).json()["shards"]
    assert len(shards) == k
    assert sum(s["queued"] for s in shards) == NAMES_AT_SCALE + 3 + 20


async def test_a_scrape_at_5000_names_is_bounded_in_commands_and_size(many: Scale) -> None:
    k = many.k
    calls, text = await many.cost("/metrics")
    # the ranking: two commands a name in every shard, inside the function; the
    # detailed names: eight and the oldest job's time in every shard; counters by
    # field; a few more a shard
    ranking = 2 * NAMES_AT_SCALE * k
    assert calls <= ranking + 9 * NAMES * k + 30 * k, calls
    named = set(re.findall(r'^rota_queue_size\{[^}]*name="([^"]+)"', text, re.M))
    assert len(named) == NAMES and {"n4999", "n0007"} <= named
    assert re.search(rf"^rota_job_names\{{[^}}]*\}} {NAMES_AT_SCALE}\.0$", text, re.M)
    queued = NAMES_AT_SCALE + 3 + 20
    assert re.search(rf"^rota_queued_jobs\{{[^}}]*\}} {queued}\.0$", text, re.M)
    # docs/web.md "Metrics": 9 series for each detailed name, each line at most its
    # name, the namespace and 80 bytes, and at most 8 KB of the namespace's own
    longest = max(map(len, named))
    ns = len(many.client.namespace)
    assert len(text.encode()) <= 9 * NAMES * (80 + longest + ns) + 8000, len(text)
    every = await many.http.get("/metrics", params={"names": "all"})
    assert len(re.findall(r"^rota_queue_size\{", every.text, re.M)) == NAMES_AT_SCALE


async def test_a_scrape_reads_the_top_keys_of_its_names_at_once(many: Scale) -> None:
    k = many.k
    plain, _ = await many.cost("/metrics")
    keyed, text = await many.cost("/metrics?keys=top")
    # one ZREVRANGE a detailed name a shard, then LLEN, ZCARD and HMGET of each key
    # found, the keys of the CANDIDATES * KEYS largest backlogs
    assert keyed - plain <= NAMES * k + 3 * CANDIDATES * KEYS * k + 4 * k, (plain, keyed)
    rows = re.findall(r'^rota_fair_key_queued\{[^}]*name="n0007"[^}]*\} 1\.0$', text, re.M)
    assert len(rows) == KEYS


async def test_the_series_of_a_scrape_are_the_ones_documented(
    http: httpx.AsyncClient, client: Client
) -> None:
    await client.enqueue("mail", 1)
    await client.enqueue("mail", 2, fair_key="acme")
    docs = WEB_MD.read_text()
    for keys, expected in (("", SERIES), ("?keys=top", SERIES | KEY_SERIES)):
        text = (await http.get("/metrics" + keys)).text
        families = {f.name for f in text_string_to_metric_families(text)}
        assert families == expected, families ^ expected
    for name in SERIES | KEY_SERIES:
        # the namespace's counters are listed as one row: `rota_namespace_jobs_processed_total`,
        # `_failed_total`...
        short = "`_" + name.removeprefix("rota_namespace_jobs_") + "_total`"
        assert f"`{name}" in docs or short in docs, name
