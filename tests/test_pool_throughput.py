"""Many jobs over many names and two pools: each runs exactly once, nothing is left."""

from __future__ import annotations

from collections import Counter

import anyio
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import namespace_keys, pool_settings, wait_until

NAMES = [f"job{i}" for i in range(5)]


def make_pool(redis_url: str, namespace: str, ledger: Counter[str]) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=50))
    for name in NAMES:

        async def handler(ctx: JobContext, n: int) -> None:
            ledger[ctx.id] += 1

        pool.job(name=name)(handler)
    return pool


async def test_ten_thousand_jobs_two_pools_exactly_once(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    ledger: Counter[str] = Counter()
    specs = [JobSpec(name=NAMES[i % 5], kwargs={"n": i}) for i in range(10_000)]
    ids = []
    for i in range(0, len(specs), 1000):
        ids += [job.id for job in await client.enqueue_many(specs[i : i + 1000])]
    assert len(set(ids)) == 10_000

    pool_a = make_pool(redis_url, namespace, ledger)
    pool_b = make_pool(redis_url, namespace, ledger)
    async with pool_a.running(), pool_b.running():
        await wait_until(lambda: len(ledger) == 10_000, within=120)
        await wait_until(lambda: _stat(redis_sync, namespace, "processed") == 10_000)

    assert set(ledger) == set(ids)
    assert all(count == 1 for count in ledger.values()), ledger.most_common(3)
    stats = await client.admin.stats()
    assert stats["processed"] == 10_000
    assert "failed" not in stats
    assert {stats[f"processed:{name}"] for name in NAMES} == {2000}
    for q in await client.admin.queues():
        assert (q.size, q.running) == (0, 0), q
    for which in ("scheduled", "retry", "dead"):
        assert (await client.admin.page(which)).total == 0
    left = namespace_keys(redis_sync, namespace)
    assert not [k for k in left if ":job:" in k or ":queue:" in k or ":running:" in k], left


def _stat(r: redis.Redis, namespace: str, field: str) -> int:
    return int(r.hget("{" + namespace + "}:stats", field) or 0)


async def test_pool_serves_jobs_enqueued_while_running(
    client: Client, redis_url: str, namespace: str
) -> None:
    ledger: Counter[str] = Counter()
    pool = make_pool(redis_url, namespace, ledger)
    async with pool.running():
        for i in range(50):
            await client.enqueue(NAMES[i % 5], n=i)
            await anyio.sleep(0.002)
        await wait_until(lambda: len(ledger) == 50)
    assert set(ledger.values()) == {1}
