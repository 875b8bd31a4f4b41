"""A pool's heartbeat over several shards on one server: its snapshot and its score in
shard 0 only; idle in a shard past the pools' expiry it stays alive, and a pool (of an
older version) scored in every shard that stops beating is forgotten in every shard (see
rota.worker.heartbeat and rota.worker.idle)."""

from __future__ import annotations

import anyio
import msgspec
import redis
from structlog.testing import capture_logs

from rota import Client, JobContext, WorkerPool
from rota.protocol.job import now_ms
from rota.protocol.keys import Keys
from rota.protocol.shards import new_id_in
from rota.protocol.snapshot import PoolSnapshot
from rota.worker.rounds import BEAT, REAP
from tests.helpers import pool_settings, rounds, wait_until
from tests.unit.test_shard_tags import K

INTERVAL = 0.2  # the pools' expiry: three of them


async def test_a_pool_idle_in_a_shard_past_its_expiry_stays_alive_there(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """One long job holds a lease in one shard; in the others the pool holds nothing for
    far longer than the pools' expiry (three intervals). Every shard's reaper passes
    meanwhile: the pool stays in shard 0's pools set, the only one it is scored in,
    nothing is reaped, its job runs once; its snapshot is in shard 0 alone, where the web
    and the CLI read it."""
    settings = pool_settings(redis_url, namespace, shards=K, heartbeat_interval=INTERVAL, lease=1.0)
    pool = WorkerPool(settings=settings)
    ran: list[str] = []
    holding = anyio.Event()
    release = anyio.Event()

    @pool.job
    async def long(ctx: JobContext) -> None:
        ran.append(ctx.id)
        holding.set()
        await release.wait()

    with capture_logs() as logs:
        async with Client.from_url(redis_url, namespace, shards=K) as c, pool.running() as rt:
            job = await c.enqueue("long")
            await holding.wait()
            await rounds(pool, REAP, n=6)  # each shard's reaper: past 4 intervals
            keys = [Keys(namespace, i, K) for i in range(K)]
            scores = [redis_sync.zscore(k.pools, rt.pool_id) for k in keys]
            snapshots = [redis_sync.exists(k.pool(rt.pool_id)) for k in keys]
            listed = await c.admin.pools()
            release.set()
            await wait_until(lambda: ran == [job.id] and not rt.in_flight)
    assert scores[0] is not None and scores[1:] == [None] * (K - 1), scores
    assert snapshots == [1] + [0] * (K - 1)
    assert [p.id for p in listed] == [rt.pool_id]
    assert [p.busy[0].job_id for p in listed] == [job.id]
    assert ran == [job.id]
    said = [e["event"] for e in logs]
    assert not [e for e in said if "stopped beating" in e or "lease" in e], said


async def test_a_pool_that_stops_beating_is_forgotten_in_every_shard(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A pool gone without its goodbye leaves its score in every shard and its snapshot
    in shard 0, as a live one writes them: once its last beat is older than the pools'
    expiry, a reaper pass of each shard forgets it there. In a shard but 0 that comes
    after shard 0's next look (at most an interval) found the score there, and after the
    calm that the shard's first beats since it was idle start (two intervals: see
    rota.worker.idle), so the test waits for the outcome instead of one pass."""
    settings = pool_settings(redis_url, namespace, shards=K, heartbeat_interval=INTERVAL)
    pool = WorkerPool(settings=settings)
    pool.job(name="n")(_noop)
    keys = [Keys(namespace, i, K) for i in range(K)]
    async with Client.from_url(redis_url, namespace, shards=K) as c, pool.running():
        await rounds(pool, REAP)
        expired = now_ms() - int(INTERVAL * 3000) - 1
        snap = PoolSnapshot(
            id="gone", host="h", pid=1, version="0", namespace=namespace, concurrency=1,
            jobs=["n"], started_at=expired, heartbeat_at=expired, busy=[],
            heartbeat_interval=INTERVAL,
        )  # fmt: skip
        for k in keys:
            redis_sync.zadd(k.pools, {"gone": expired})
        redis_sync.set(keys[0].pool("gone"), msgspec.json.encode(snap))
        with capture_logs() as logs:
            await rounds(pool, BEAT)  # shard 0's look finds the other shards' scores
            await wait_until(lambda: not any(redis_sync.zscore(k.pools, "gone") for k in keys))
            await rounds(pool, REAP)  # shard 0's too, whatever the order
        listed = await c.admin.pools()
    assert [redis_sync.zscore(k.pools, "gone") for k in keys] == [None] * K
    assert not redis_sync.exists(keys[0].pool("gone"))
    forgotten = [e for e in logs if e["event"] == "pool stopped beating: forgotten"]
    assert len(forgotten) == K, forgotten
    assert "gone" not in [p.id for p in listed]


async def test_a_job_running_in_any_shard_shows_its_checkin(redis_url: str, namespace: str) -> None:
    """The running jobs' checkin messages come from the pool's snapshot, in shard 0
    alone: a job of another shard shows its message too."""
    settings = pool_settings(redis_url, namespace, shards=K, heartbeat_interval=INTERVAL)
    pool = WorkerPool(settings=settings)
    release = anyio.Event()

    @pool.job
    async def told(ctx: JobContext) -> None:
        await ctx.checkin("halfway")
        await release.wait()

    async with Client.from_url(redis_url, namespace, shards=K) as c, pool.running():
        job = await c.enqueue("told", job_id=new_id_in(K - 1, K))

        async def said() -> bool:
            return [(r.job_id, r.message) for r in await c.admin.running()] == [(job.id, "halfway")]

        await wait_until(said)
        release.set()


async def test_a_name_a_live_pool_serves_is_kept_in_every_shard(
    redis_url: str, namespace: str
) -> None:
    """Idle names are forgotten in each shard but those a live pool serves, which its
    snapshot in shard 0 lists."""
    settings = pool_settings(redis_url, namespace, shards=K, heartbeat_interval=INTERVAL)
    pool = WorkerPool(settings=settings)
    pool.job(name="served")(_noop)
    async with Client.from_url(redis_url, namespace, shards=K) as c, pool.running():
        for shard in c.admin.shards:
            await shard.redis.sadd(shard.keys.names, "old")
        assert await c.admin.forget_idle_names(0.05) == []  # first seen idle: noted only
        await anyio.sleep(0.1)  # past ``after``: no wait for the pool
        assert await c.admin.forget_idle_names(0.05) == ["old"]
        kept = [await shard.names() for shard in c.admin.shards]
    assert kept == [["served"]] * K


async def _noop(ctx: JobContext) -> None:
    pass
