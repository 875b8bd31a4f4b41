"""Job names are forgotten once they have had nothing for a while (no job, pause, limit
or live pool): 5,000 names used once made /queues 8 MB and /metrics 3 MB for ever."""

from __future__ import annotations

import anyio

from rota import Client, JobContext, WorkerPool
from tests.helpers import pool_settings, wait_until


async def test_only_names_with_nothing_for_long_enough_are_forgotten(client: Client) -> None:
    await client.admin.shards[0].redis.sadd(
        client.admin.shards[0].keys.names, "old", "queued", "paused", "limited", "rated"
    )
    await client.enqueue("queued", 1)
    await client.admin.pause("paused")
    await client.admin.set_limit("limited", 2)
    await client.admin.set_rate("rated", "5/s")
    assert await client.admin.forget_idle_names(0.2) == []  # first seen idle: noted only
    assert await client.admin.shards[0].redis.hkeys(client.admin.shards[0].keys.idle) == [b"old"]
    await anyio.sleep(0.3)
    assert await client.admin.forget_idle_names(0.2) == ["old"]
    assert await client.admin.names() == ["limited", "paused", "queued", "rated"]
    assert await client.admin.shards[0].redis.hlen(client.admin.shards[0].keys.idle) == 0
    # A forgotten name comes back with its next job, as any new name does.
    await client.enqueue("old", 1)
    assert "old" in await client.admin.names()


async def test_a_name_busy_again_starts_its_wait_over(client: Client) -> None:
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.names, "blip")
    await client.admin.forget_idle_names(0.2)
    job = await client.enqueue("blip", 1)
    assert await client.admin.forget_idle_names(0.2) == []  # busy: no longer idle
    assert await client.admin.shards[0].redis.hlen(client.admin.shards[0].keys.idle) == 0
    assert job.created
    await client.admin.clear_queue("blip")
    await client.admin.forget_idle_names(0.2)
    await anyio.sleep(0.3)
    assert await client.admin.forget_idle_names(0.2) == ["blip"]


async def test_a_pool_forgets_idle_names_but_never_its_own(
    client: Client, redis_url: str, namespace: str
) -> None:
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.names, "gone")
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, heartbeat_interval=0.05, forget_names_after=0.3
        )
    )

    @pool.job
    async def served(ctx: JobContext) -> None:
        pass

    async with pool.running(client=client):
        await wait_until(lambda: _names(client), within=20)
        assert await client.admin.names() == ["served"]
    assert await client.admin.forget_idle_names(0.0) == []  # its pool is gone: first noted


async def _names(client: Client) -> bool:
    return await client.admin.names() == ["served"]


async def test_many_pools_forget_in_turn_not_each(client: Client) -> None:
    """Every pool's reaper asks; one of them per turn reads the names."""
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.names, "old")
    assert await client.admin.forget_idle_names(0.1, turn=60) == []  # noted idle, turn taken
    await anyio.sleep(0.2)
    assert await client.admin.forget_idle_names(0.1, turn=60) == []  # another pool: not its turn
    assert await client.admin.names() == ["old"]
    await client.admin.shards[0].redis.delete(
        client.admin.shards[0].keys.forget_turn
    )  # the turn passed
    assert await client.admin.forget_idle_names(0.1, turn=60) == ["old"]


async def test_a_pool_over_shards_forgets_in_each_with_one_turn(
    redis_url: str, namespace: str
) -> None:
    """A pool over 3 shards forgets an idle name in each of them, by one pass of shard
    0's reaper: the turn is taken in shard 0 alone (before, each shard's reaper took its
    own and read the pools' snapshots again, a few commands a shard a turn)."""
    settings = pool_settings(
        redis_url, namespace, shards=3, heartbeat_interval=0.05, forget_names_after=0.3
    )
    pool = WorkerPool(settings=settings)

    @pool.job
    async def served(ctx: JobContext) -> None:
        pass

    async with Client.from_url(redis_url, namespace, shards=3) as client:
        shards = client.admin.shards
        for shard in shards:
            await shard.redis.sadd(shard.keys.names, "gone")

        async def forgotten() -> bool:
            return all([await s.names() == ["served"] for s in shards])

        async with pool.running(client=client):
            await wait_until(forgotten, within=20)
        for shard in shards[1:]:
            assert not await shard.redis.exists(shard.keys.forget_turn)
