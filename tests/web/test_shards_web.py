"""The web UI, its API and /metrics over a namespace of four shards on one real Redis:
every page shows the namespace whole, a job or a group is read in the shard that holds
it, and /shards shows each shard on its own."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import httpx
import msgspec
import pytest
import redis
from redis.crc import key_slot

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.keys import Keys
from rota.protocol.shards import new_id_in, shard_of, shard_tags
from rota.web import create_app
from tests.cli_helpers import rota_env, run_rota
from tests.helpers import pool_settings, wait_until
from tests.web.conftest import BASE

K = 4
PAGE = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


@dataclass
class Web:
    client: Client
    http: httpx.AsyncClient
    namespace: str


@pytest.fixture
async def web(redis_url: str, namespace: str) -> AsyncIterator[Web]:
    client = Client.from_url(redis_url, namespace, shards=K)
    app = create_app(pool_settings(redis_url, namespace, shards=K), client=client)
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            yield Web(client, http, namespace)
    finally:
        await client.close()


def _per_shard(r: redis.Redis, namespace: str, name: str) -> list[int]:
    return [int(r.llen(Keys(namespace, i, K).queue(name))) for i in range(K)]


async def _run(web: Web, redis_url: str) -> None:
    """20 jobs completed and 12 dead, spread over the shards by their ids."""
    pool = WorkerPool(settings=pool_settings(redis_url, web.namespace, shards=K, keep_result=600))

    @pool.job
    async def ok(ctx: JobContext) -> int:
        return 1

    @pool.job(max_fails=1)
    async def boom(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    c = web.client
    await c.enqueue_many([JobSpec(name="ok") for _ in range(20)])
    await c.enqueue_many([JobSpec(name="boom") for _ in range(12)])
    async with pool.running():
        await wait_until(lambda: _settled(c), within=30)


async def _settled(client: Client) -> bool:
    stats = await client.admin.stats()
    return stats.get("processed:ok", 0) == 20 and (await client.admin.job_set_sizes())["dead"] == 12


async def test_queues_sets_dashboard_and_metrics_show_every_shard(
    web: Web, redis_url: str, redis_sync: redis.Redis
) -> None:
    await _run(web, redis_url)
    queued = await web.client.enqueue_many([JobSpec(name="n", kwargs={"i": i}) for i in range(40)])
    per_shard = _per_shard(redis_sync, web.namespace, "n")
    assert sum(per_shard) == 40 and min(per_shard) > 0  # spread: shard 0 is not the whole
    dead = {i for i in range(K) if redis_sync.zcard(Keys(web.namespace, i, K).dead)}
    assert len(dead) > 1

    queues = (await web.http.get("/api/queues")).json()
    sizes = {q["name"]: q["size"] for q in queues["queues"]}
    assert sizes["n"] == 40
    page = (await web.http.get("/queues", headers=PAGE)).text
    assert re.search(r">n</a>.*?>40<", page, re.S), "the /queues row of n says 40"

    jobs = (await web.http.get("/api/queues/n/jobs", params={"limit": 100})).json()
    assert jobs["total"] == 40
    assert sorted(j["id"] for j in jobs["jobs"]) == sorted(j.id for j in queued)
    times = [j["enqueued_at"] for j in jobs["jobs"]]
    assert times == sorted(times)  # the next to run first, over every shard
    newest = (await web.http.get("/api/queues/n/jobs?order=newest&offset=35&limit=10")).json()
    assert [j["id"] for j in newest["jobs"]] == [j["id"] for j in jobs["jobs"]][:5][::-1]

    stats = (await web.http.get("/api/queues/ok/stats")).json()
    assert sum(m["processed"] for m in stats["minutes"]) == 20

    dead_api = (await web.http.get("/api/dead")).json()
    assert dead_api["total"] == 12 and len(dead_api["jobs"]) == 12
    dead_page = (await web.http.get("/dead", headers=PAGE)).text
    for job in dead_api["jobs"]:
        assert job["id"] in dead_page

    dash = (await web.http.get("/api/dashboard")).json()
    assert dash["sizes"]["queued"] == 40 and dash["sizes"]["dead"] == 12
    assert dash["totals"]["processed"] == 20
    assert sum(m["processed"] for m in dash["minutes"]) == 20
    assert sum(m["failed"] for m in dash["minutes"]) == 12

    metrics = (await web.http.get("/metrics")).text
    ns = web.namespace

    def value(metric: str, **labels: str) -> float:
        want = {"namespace": ns, **labels}
        for line in metrics.splitlines():
            m = re.fullmatch(rf"{metric}\{{(.*)\}} (\S+)", line)
            if m and dict(re.findall(r'(\w+)="([^"]*)"', m[1])) == want:
                return float(m[2])
        raise AssertionError(f"no {metric} {want}")

    assert value("rota_queue_size", name="n") == 40
    assert value("rota_jobs_processed_total", name="ok") == 20
    assert value("rota_jobs_dead_total", name="boom") == 12
    assert value("rota_jobs_in_set", set="dead") == 12
    assert value("rota_redis_memory_used_bytes") > 0


async def test_a_page_deep_in_a_queue_over_shards_is_where_its_offset_points(web: Web) -> None:
    """12 batches of 100 jobs, each batch enqueued in a later ms than the one before: a
    page merged exactly (within the first 1,000) holds its batch only; a deeper one, read
    from each shard at offset / 4, is near its place: each shard holds about 300 of the
    jobs, give or take 15 (the ids spread them at random), so its 275th job lies within
    about 100 of the 1,100th overall (batches 9 to 11), never near the start."""
    batch_of: dict[str, int] = {}
    for b in range(12):
        jobs = await web.client.enqueue_many([JobSpec(name="n") for _ in range(100)])
        batch_of.update({j.id: b for j in jobs})
        await anyio.sleep(0.003)
    exact = (await web.http.get("/api/queues/n/jobs?offset=900&limit=50")).json()
    assert exact["total"] == 1200
    assert {batch_of[j["id"]] for j in exact["jobs"]} == {9} and len(exact["jobs"]) == 50
    deep = (await web.http.get("/api/queues/n/jobs?offset=1100&limit=50")).json()
    assert len(deep["jobs"]) == 50
    assert {batch_of[j["id"]] for j in deep["jobs"]} <= {9, 10, 11}
    newest = (await web.http.get("/api/queues/n/jobs?order=newest&offset=50&limit=50")).json()
    assert {batch_of[j["id"]] for j in newest["jobs"]} == {11}


async def test_a_job_its_flow_and_a_group_of_shard_3_are_found(web: Web) -> None:
    c = web.client
    await c.enqueue_many([JobSpec(name="n") for _ in range(8)])
    parent = await c.enqueue("n", job_id=new_id_in(3, K))
    child = await c.enqueue("n", after=[parent.id])
    assert shard_of(parent.id, K) == 3 and shard_of(child.id, K) == 3

    detail = (await web.http.get(f"/api/jobs/{parent.id}")).json()
    assert detail["id"] == parent.id and detail["state"] == "queued"
    assert [k["id"] for k in detail["children"]] == [child.id]
    page = await web.http.get(f"/jobs/{parent.id}", headers=PAGE)
    assert page.status_code == 200 and child.id in page.text

    flow = (await web.http.get(f"/api/flows/{child.id}")).json()
    assert {n["id"] for n in flow["nodes"]} == {parent.id, child.id}
    assert flow["edges"] == [{"from": parent.id, "to": child.id, "kind": "after"}]

    group = await c.group(
        [JobSpec(name="n", kwargs={"m": i}) for i in range(5)],
        then=JobSpec(name="n"),
        group_id=new_id_in(3, K),
    )
    assert group.then is not None
    body = (await web.http.get(f"/api/groups/{group.id}")).json()
    assert body["total"] == 5
    assert sorted(m["id"] for m in body["members"]) == sorted(m.id for m in group.jobs)
    assert body["then"]["id"] == group.then.id
    waiting = (await web.http.get(f"/api/groups/{group.id}?state=waiting")).json()
    assert waiting["matching"] == 5
    page = await web.http.get(f"/groups/{group.id}", headers=PAGE)
    assert page.status_code == 200 and group.jobs[0].id in page.text
    # The callback's page reads its group in the group's shard.
    callback = (await web.http.get(f"/api/jobs/{group.then.id}")).json()
    assert callback["group_progress"]["total"] == 5


async def test_the_shards_page_lists_each_shard(
    web: Web, redis_sync: redis.Redis, redis_url: str
) -> None:
    c = web.client
    await c.enqueue_many([JobSpec(name="n") for _ in range(30)])
    await c.enqueue_in(600, "later")
    parent = await c.enqueue("n", job_id=new_id_in(2, K))
    await c.enqueue("n", after=[parent.id])
    body = (await web.http.get("/api/shards")).json()
    assert body["namespace"] == web.namespace
    rows = body["shards"]
    tags = shard_tags(web.namespace, K)
    assert [r["shard"] for r in rows] == list(range(K))
    per_shard = _per_shard(redis_sync, web.namespace, "n")
    port = redis_sync.connection_pool.connection_kwargs["port"]
    for i, row in enumerate(rows):
        assert row["tag"] == "{" + tags[i] + "}"
        assert row["slot"] == key_slot(tags[i].encode())
        assert row["server"].endswith(f":{port}")
        assert row["queued"] == per_shard[i]
        assert row["running"] == row["retry"] == row["dead"] == 0
        assert row["waiting"] == (1 if i == 2 else 0)
    assert sum(r["queued"] for r in rows) == 31
    assert sum(r["scheduled"] for r in rows) == 1
    page = (await web.http.get("/shards", headers=PAGE)).text
    for tag in tags:
        assert "{" + tag + "}" in page
    schema = (await web.http.get("/api/openapi.json")).json()
    assert "/api/shards" in schema["paths"]
    # `rota shards` prints the same read.
    done = run_rota(
        "shards",
        "--json",
        "--redis-url",
        redis_url,
        "--namespace",
        web.namespace,
        env=rota_env(ROTA_SHARDS=str(K)),
    )
    assert done.returncode == 0, done.stderr
    assert msgspec.json.decode(done.stdout) == body


async def test_one_shard_reads_as_before(
    http: httpx.AsyncClient, client: Client, namespace: str
) -> None:
    """With one shard the page lists the namespace's one tag."""
    if len(client.admin.shards) != 1:
        pytest.skip("the suite runs sharded")
    await client.enqueue_many([JobSpec(name="n") for _ in range(3)])
    rows = (await http.get("/api/shards")).json()["shards"]
    assert [(r["shard"], r["tag"], r["queued"]) for r in rows] == [(0, "{" + namespace + "}", 3)]
