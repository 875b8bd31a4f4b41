"""max_concurrency holds across pools: the running set never exceeds the limit."""

from __future__ import annotations

import anyio
import pytest
import redis

from rota import Client, JobContext, WorkerPool
from tests.helpers import pool_settings, wait_until


@pytest.mark.one_shard  # a limit of 2, below 4 shards
async def test_max_concurrency_across_two_pools(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    done: list[str] = []
    running_now = 0
    seen_in_process = 0

    def make_pool() -> WorkerPool:
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=10))

        @pool.job(max_concurrency=3)
        async def limited(ctx: JobContext) -> None:
            nonlocal running_now, seen_in_process
            running_now += 1
            seen_in_process = max(seen_in_process, running_now)
            await anyio.sleep(0.01)
            running_now -= 1
            done.append(ctx.id)

        @pool.job
        async def free(ctx: JobContext) -> None:
            done.append(ctx.id)

        return pool

    for _ in range(150):
        await client.enqueue("limited")
    for _ in range(50):
        await client.enqueue("free")

    running_key = "{" + namespace + "}:running:limited"
    samples: list[int] = []

    async def sample() -> None:
        while True:
            samples.append(int(redis_sync.zcard(running_key)))
            await anyio.sleep(0.002)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        async with make_pool().running(), make_pool().running():
            await wait_until(lambda: len(done) == 200, within=30)
        tg.cancel_scope.cancel()

    assert len(samples) > 50
    assert max(samples) <= 3
    assert max(samples) == 3  # the limit was reached, so the check above means something
    assert seen_in_process <= 3
    assert redis_sync.zcard(running_key) == 0
    (q,) = await client.admin.queues(["limited"])
    assert (q.size, q.running, q.limit) == (0, 0, 3)
