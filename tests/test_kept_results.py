"""What a complete job leaves in Redis: a record while someone can read it, within a cap.

A job that returned None, that nobody waits for and that has no children and no group
is kept ``keep_none`` (60 s by default; 0 leaves nothing); one with a result is kept for
``keep_result``; a handler's own ``keep_result`` keeps all its jobs. Kept records are
counted in ``{ns}:complete`` and the oldest beyond ``complete_max_count`` are deleted.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
import redis

from rota import Client, JobContext, JobSpec, Settings, WorkerPool
from tests.helpers import pool_settings, wait_until


async def _nothing(ctx: JobContext) -> None:
    return None


def _pool(redis_url: str, namespace: str, **changes: Any) -> WorkerPool:
    """A pool that keeps nothing for no result, with a handler ``nothing`` that returns
    None."""
    values: dict[str, Any] = {"keep_result": 3600.0, "keep_none": 0.0}
    values.update(changes)
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **values))
    pool.job(name="nothing")(_nothing)
    return pool


async def _processed(client: Client, n: int) -> None:
    async def done() -> bool:
        return (await client.admin.stats()).get("processed", 0) >= n

    await wait_until(done, within=10)


@pytest.mark.one_shard("reads one shard's keys")
async def test_a_job_without_result_leaves_no_record_and_one_with_a_result_is_kept(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = _pool(redis_url, namespace)

    @pool.job
    async def answer(ctx: JobContext) -> int:
        return 42

    @pool.job(keep_result=600)
    async def asked(ctx: JobContext) -> None:
        return None

    empty = await client.enqueue("nothing", job_id="empty-1")
    full = await client.enqueue("answer")
    kept = await client.enqueue("asked")
    async with pool.running():
        await _processed(client, 3)
    assert not redis_sync.exists(client.admin.shards[0].keys.job(empty.id))
    assert await client.job(empty.id) is None
    record = await client.job(full.id)
    assert record is not None and record.state == "complete"
    assert await client.wait(full.id, timeout=5) == 42  # after the end: read from the record
    assert 3500_000 < redis_sync.pttl(client.admin.shards[0].keys.job(full.id)) <= 3600_000
    record = await client.job(kept.id)
    assert record is not None and record.state == "complete"
    assert 500_000 < redis_sync.pttl(client.admin.shards[0].keys.job(kept.id)) <= 600_000
    members = {
        m.decode()
        for m in cast(list[bytes], redis_sync.zrange(client.admin.shards[0].keys.complete, 0, -1))
    }
    assert members == {full.id, kept.id}
    # The id is free again once its record is gone.
    again = await client.enqueue("nothing", job_id="empty-1")
    assert again.created


@pytest.mark.one_shard("reads one shard's keys")
async def test_a_job_without_result_is_kept_for_its_waiter(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = _pool(redis_url, namespace)

    await client.admin.pause("nothing")
    job = await client.enqueue("nothing")
    got: list[Any] = []

    async def waiter() -> None:
        got.append(await client.wait(job.id, timeout=10))

    async with pool.running(), anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await wait_until(
            lambda: redis_sync.hexists(client.admin.shards[0].keys.job(job.id), "waiters")
        )
        await client.admin.resume("nothing")
        await wait_until(lambda: bool(got), within=10)
    assert got == [None]
    record = await client.job(job.id)
    assert record is not None and record.state == "complete"


@pytest.mark.one_shard("reads one shard's keys")
async def test_by_default_a_job_without_result_is_kept_a_minute(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = WorkerPool(settings=Settings(redis_url=redis_url, namespace=namespace, grace=2.0))
    assert pool.settings.keep_none == 60.0
    pool.job(name="nothing")(_nothing)

    job = await client.enqueue("nothing")
    async with pool.running():
        await _processed(client, 1)
    assert 50_000 < redis_sync.pttl(client.admin.shards[0].keys.job(job.id)) <= 60_000
    assert await client.wait(job.id, timeout=5) is None  # a wait after the end


@pytest.mark.one_shard("FIFO holds within a shard, not across shards")
async def test_the_cap_deletes_the_oldest_kept_jobs_first(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = _pool(redis_url, namespace, concurrency=1, prefetch=0, complete_max_count=5)
    order: list[str] = []

    @pool.job
    async def answer(ctx: JobContext, i: int) -> int:
        order.append(ctx.id)
        await anyio.sleep(0.005)  # each completes in a millisecond of its own
        return i

    jobs = [await client.enqueue("answer", i) for i in range(12)]
    async with pool.running():
        await _processed(client, 12)
    assert order == [j.id for j in jobs]  # one at a time, in order
    left = [
        m.decode()
        for m in cast(list[bytes], redis_sync.zrange(client.admin.shards[0].keys.complete, 0, -1))
    ]
    assert set(left) == set(order[-5:])
    for job in jobs[:-5]:
        assert not redis_sync.exists(client.admin.shards[0].keys.job(job.id))
    for i, job in enumerate(jobs[-5:], start=7):
        assert await client.wait(job.id, timeout=5) == i


async def test_parents_and_group_members_without_result_are_kept(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = _pool(redis_url, namespace)

    @pool.job
    async def step(ctx: JobContext) -> None:
        return None

    parent = await client.enqueue("step")
    child = await client.enqueue("step", after=[parent.id])
    group = await client.group([JobSpec(name="step") for _ in range(3)])
    async with pool.running():
        await _processed(client, 5)
    for job_id in (parent.id, *(j.id for j in group.jobs)):
        record = await client.job(job_id)
        assert record is not None and record.state == "complete", job_id
    assert await client.job(child.id) is None  # a leaf with no result: nothing kept
    # A job enqueued after a complete parent finds it.
    late = await client.enqueue("step", after=[parent.id])
    assert late.created
