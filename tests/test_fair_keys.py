"""Fair keys: within a job name, the jobs of different keys take turns (stride scheduling,
weights), FIFO within a key; jobs without a key keep the plain list, as one more
participant of weight 1."""

from __future__ import annotations

import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import pool_settings, wait_until


def _ledger_pool(
    redis_url: str, namespace: str, ran: list[tuple[str, int]], **kw: object
) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **kw))

    @pool.job
    async def hook(ctx: JobContext, key: str, seq: int) -> None:
        ran.append((key, seq))

    return pool


@pytest.mark.one_shard("turns are counted within a shard")
async def test_keys_take_turns_and_fifo_holds_within_a_key(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    specs = [
        JobSpec(name="hook", kwargs={"key": "big", "seq": i}, fair_key="big") for i in range(50)
    ]
    specs += [
        JobSpec(name="hook", kwargs={"key": f"k{k}", "seq": i}, fair_key=f"k{k}")
        for k in range(5)
        for i in range(3)
    ]
    await client.enqueue_many(specs)
    ran: list[tuple[str, int]] = []
    async with _ledger_pool(redis_url, namespace, ran, concurrency=1).running():
        await wait_until(lambda: len(ran) == 65, within=20)
    # every small key's jobs ran before the flood ended, each key in its order
    last_small = max(i for i, (key, _) in enumerate(ran) if key != "big")
    assert last_small < 40, ran
    for key in {k for k, _ in ran}:
        seqs = [s for k, s in ran if k == key]
        assert seqs == sorted(seqs), key
    (q,) = await client.admin.queues(["hook"])
    assert q.size == 0
