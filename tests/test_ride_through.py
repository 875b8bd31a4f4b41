"""A pool after a short outage: its leases stay its own and an operator's changes stay.

The chaos scenario (tests/chaos/test_short_outage.py) counts duplicates over many
outages; these tests pin each mechanism behind it on one pool, with a real Redis:

- a reaper does not reclaim leases right after an outage: every pool's heartbeat
  extends them first;
- a heartbeat that finds its pool forgotten by a reaper (it was late) lists it again
  without writing the code's limits over an operator's, while a Redis that lost its
  data gets them back (tests/test_outage.py);
- a Redis killed and restarted on its append-only file within the lease runs nothing
  twice and keeps the operator's limit.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import anyio
import pytest
import redis.exceptions
from structlog.testing import capture_logs

from rota import Client, JobContext, RedisRefused, RedisUnavailable, State, WorkerPool
from rota.protocol import calls
from rota.protocol.job import now_ms
from rota.worker.heartbeat import Reaper
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


async def _finished(client: Client, job_id: str) -> bool:
    """Whether the job reached an end (False while Redis is away, or loading its data
    after a restart: a refusal that passes)."""
    try:
        record = await client.job(job_id)
    except RedisUnavailable:
        return False
    except RedisRefused as exc:
        if not exc.condition:
            raise
        return False
    return record is not None and record.state in (State.COMPLETE, State.DEAD)


async def _held(client: Client, key: str, member: str) -> bool:
    return await client.admin.shards[0].redis.zscore(key, member) is not None


async def test_a_reaper_leaves_leases_alone_right_after_an_outage(
    redis_server: RedisServer, namespace: str
) -> None:
    """A lease that expired while Redis was away is its pool's to extend: the reaper of
    a pool that has just seen an outage waits one heartbeat interval of calm."""
    release = anyio.Event()
    pool = WorkerPool(
        settings=pool_settings(redis_server.url, namespace, heartbeat_interval=60, lease=120)
    )

    @pool.job()
    async def held(ctx: JobContext) -> None:
        await release.wait()

    async with Client.from_url(redis_server.url, namespace) as client, pool.running() as rt:
        try:
            job = await client.enqueue("held")
            running = client.admin.shards[0].keys.running("held")
            await wait_until(lambda: _held(client, running, job.id))
            await client.admin.shards[0].redis.zadd(running, {job.id: 1})  # expired long ago
            await rt.watch.failed("fetcher", redis.exceptions.ConnectionError("gone"))
            rt.watch.ok("fetcher")  # Redis is back this instant
            reaper = Reaper(rt)
            await reaper.reap()
            assert await client.admin.shards[0].redis.zscore(running, job.id) == 1  # not reclaimed
            assert (
                await client.admin.shards[0].redis.hget(
                    client.admin.shards[0].keys.job(job.id), "lost"
                )
                is None
            )
            rt.watch.last_failure = time.monotonic() - 61  # a heartbeat interval of calm
            await reaper.reap()
            assert (
                await client.admin.shards[0].redis.hget(
                    client.admin.shards[0].keys.job(job.id), "lost"
                )
                == b"1"
            )
        finally:
            release.set()


@pytest.mark.one_shard("reads one shard's keys")
async def test_a_pool_forgotten_by_a_reaper_keeps_the_operators_limit(
    redis_server: RedisServer, namespace: str
) -> None:
    """A pool whose heartbeat was late is forgotten by another pool's reaper; its next
    heartbeat lists it again, and Redis still holds its data: the limit an operator set
    stays, the code's does not come back."""
    pool = WorkerPool(settings=pool_settings(redis_server.url, namespace, heartbeat_interval=0.1))

    @pool.job(max_concurrency=3, priority=5)
    async def limited(ctx: JobContext) -> None:
        pass

    async with Client.from_url(redis_server.url, namespace) as client, pool.running() as rt:
        k = client.admin.shards[0].keys
        assert await client.admin.shards[0].redis.hget(k.limits, "limited") == b"3"
        await client.admin.set_limit("limited", 1)
        await client.admin.shards[0].redis.hset(k.priorities, "limited", 9)
        with capture_logs() as logs:
            await client.admin.shards[0].redis.zrem(k.pools, rt.pool_id)  # what a reaper does
            await wait_until(lambda: _held(client, k.pools, rt.pool_id))
            await wait_until(lambda: any("late" in e["event"] for e in logs))
        assert await client.admin.shards[0].redis.hget(k.limits, "limited") == b"1"
        assert await client.admin.shards[0].redis.hget(k.priorities, "limited") == b"9"
        assert not [e for e in logs if "Redis had lost" in e["event"]]


async def test_a_restart_within_the_lease_runs_nothing_twice_and_keeps_the_limit(
    aof_server: RedisServer, namespace: str
) -> None:
    """kill -9, 2 s away, started again on its append-only file: the jobs that ran
    through it finish once, and the operator's limit is the one Redis holds after."""
    starts: dict[str, int] = {}
    settings = pool_settings(aof_server.url, namespace, lease=3, heartbeat_interval=0.5)
    pools = [WorkerPool(settings=settings) for _ in range(2)]
    for pool in pools:

        @pool.job(max_concurrency=4, keep_result=60)
        async def work(ctx: JobContext, i: int) -> int:
            starts[ctx.id] = starts.get(ctx.id, 0) + 1
            await anyio.sleep(0.3)
            return i

    # The operator over the pools' shards (the whole limit is kept in shard 0 there).
    operator = Client.from_url(aof_server.url, namespace, shards=settings.shards)
    async with Client.from_url(aof_server.url, namespace) as client, operator:
        async with pools[0].running(), pools[1].running():
            await operator.admin.set_limit("work", 2)
            jobs = [await client.enqueue("work", i) for i in range(40)]
            await wait_until(lambda: len(starts) >= 4)
            aof_server.kill()
            await anyio.sleep(2)
            aof_server.start()
            for job in jobs:
                assert await client.wait(job.id, timeout=30) is not None
            async with Client.from_url(aof_server.url, namespace, shards=settings.shards) as after:
                assert [q.limit for q in await after.admin.queues(["work"])] == [2]
        stats = await client.admin.shards[0].redis.hgetall(client.admin.shards[0].keys.stats)
    assert sorted(starts.values()) == [1] * 40, starts
    assert int(stats.get(b"lost", 0)) == 0, stats


async def test_a_child_reading_its_parents_results_waits_out_an_outage(
    aof_server: RedisServer, namespace: str
) -> None:
    """Redis goes away at the moment a child reads its parents' results (before its
    handler runs): the read waits for Redis instead of failing the attempt, so a child
    with ``max_fails=1`` runs once, with its parent's result, and nothing is dead."""
    settings = pool_settings(
        aof_server.url, namespace, keep_result=60, lease=2, heartbeat_interval=0.2
    )
    pool = WorkerPool(settings=settings)
    seen: list[dict[str, object]] = []

    @pool.job(max_fails=1)
    async def parent(ctx: JobContext) -> int:
        return 41

    @pool.job(max_fails=1)
    async def child(ctx: JobContext) -> int:
        seen.append(dict(ctx.parent_results))
        return 1

    async with Client.from_url(aof_server.url, namespace) as client:
        read = client.admin.shards[0].dependency_results
        outages = 0

        async def read_during_an_outage(job_id: str) -> dict[str, object]:
            nonlocal outages
            if not outages:  # the outage starts with the first read, for 1.5 s
                outages += 1
                aof_server.kill()
                threading.Timer(1.5, aof_server.start).start()
            return await read(job_id)

        client.admin.shards[0].dependency_results = read_during_an_outage  # type: ignore[method-assign]
        async with pool.running(client=client):
            first = await client.enqueue("parent")
            second = await client.enqueue("child", after=[first.id])
            await wait_until(lambda: _finished(client, second.id), within=30)
        record = await client.job(second.id)
    assert outages == 1 and seen == [{first.id: 41}]
    assert record is not None and record.state == State.COMPLETE
    assert record.attempts == 1 and record.lost == 0


async def test_an_enqueue_rides_through_a_short_outage_and_raises_after_a_long_one(
    aof_server: RedisServer, namespace: str
) -> None:
    """A producer whose Redis restarts keeps its call waiting for ``ride_through``
    seconds and enqueues each job once; past that it raises rota's own error."""
    async with Client.from_url(aof_server.url, namespace, ride_through=8) as client:
        await client.enqueue("x")  # this client reached Redis: later failures are outages
        aof_server.kill()
        threading.Timer(1.0, aof_server.start).start()
        job = await client.enqueue("x", job_id="during-the-outage")
        assert job.id == "during-the-outage"
        assert await client.admin.shards[0].redis.llen(client.admin.shards[0].keys.queue("x")) == 2
        client.options = client.options.replace(ride_through=0.5)
        aof_server.kill()
        with pytest.raises(RedisUnavailable, match="ride_through"):
            await client.enqueue("x")
        aof_server.start()
        assert not isinstance(RedisUnavailable("x"), redis.exceptions.RedisError)  # rota's own


def _pause(server: RedisServer, how: str, seconds: float) -> None:
    """Stop Redis for ``seconds``: ``CLIENT PAUSE`` (every client's commands wait), or
    SIGSTOP and SIGCONT of its process (as a host that stalls does)."""
    if how == "client pause":
        with server.client() as r:
            r.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")
        return
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(server.pid, signal.SIGCONT)


@pytest.mark.parametrize("how", ["client pause", "sigstop"])
async def test_a_paused_redis_makes_no_live_pool_dead(
    fresh_redis_server: RedisServer, namespace: str, how: str
) -> None:
    """Redis stopped for longer than a pool's expiry (three heartbeat intervals), then
    running again: the heartbeats the pause held back land after the first reaper
    passes, which must not take them for pools that stopped beating."""
    url = fresh_redis_server.url
    runs: dict[str, int] = {}
    pools = [WorkerPool(settings=pool_settings(url, namespace, heartbeat_interval=0.3, lease=1))]
    pools.append(WorkerPool(settings=pools[0].settings))
    for pool in pools:

        @pool.job()
        async def work(ctx: JobContext, ms: int) -> None:
            runs[ctx.id] = runs.get(ctx.id, 0) + 1
            await anyio.sleep(ms / 1000)

    async with Client.from_url(url, namespace) as client:
        with capture_logs() as logs:
            async with pools[0].running(), pools[1].running():
                jobs = [await client.enqueue("work", 50) for _ in range(400)]
                await wait_until(lambda: len(runs) >= 40)
                for _ in range(3):
                    await anyio.to_thread.run_sync(_pause, fresh_redis_server, how, 2.0)
                    await anyio.sleep(1.0)  # three heartbeat intervals
                await wait_until(lambda: len(runs) == len(jobs), within=30)
        stats = await client.admin.stats()
    forgotten = [e for e in logs if e["event"].startswith("pool stopped beating")]
    reclaimed = [e for e in logs if e["event"].startswith("lease expired")]
    assert (forgotten, reclaimed) == ([], [])
    assert set(runs.values()) == {1} and "lost" not in stats


async def test_a_reaper_waits_for_the_beats_a_paused_redis_held_back(
    fresh_redis_server: RedisServer, namespace: str
) -> None:
    """Pools a and b beat (heartbeat 0.5 s: forgotten after 1.5 s) and b holds a lease of
    1 s. Redis is paused for 2 s: b's next beat waits in it, and so does a reap whose
    caller read the time 1.7 s after b's last beat. That reap must take b neither for a
    pool that stopped beating nor for one that lost its lease, whichever of the two Redis
    runs first; once b stops beating for real, a reaper forgets it and takes its job."""
    url, expiry = fresh_redis_server.url, 1500
    async with Client.from_url(url, namespace) as a, Client.from_url(url, namespace) as b:
        await a.enqueue("work")
        (job,) = (
            await calls.fetch(
                b.admin.shards[0].scope, calls.Lessee(1000, "b", 1 << 20), ["work"], []
            )
        ).jobs
        held = [("work", job.id, job.token)]

        async def beat(client: Client, pool: str) -> None:
            deadline = now_ms() + 1000
            mine = held if pool == "b" else []
            await calls.heartbeat(client.admin.shards[0].scope, pool, b"{}", expiry, deadline, mine)

        await beat(a, "a")
        await beat(b, "b")
        with fresh_redis_server.client() as r:
            r.execute_command("CLIENT", "PAUSE", 2000, "ALL")
        async with anyio.create_task_group() as tg:
            tg.start_soon(beat, b, "b")  # held back by the pause
            await anyio.sleep(1.7)
            paused = await calls.reap(a.admin.shards[0].scope, 3, expiry, 100)  # held back too
        assert paused == ([], [], [])
        await beat(a, "a")
        await beat(b, "b")
        assert await calls.reap(a.admin.shards[0].scope, 3, expiry, 100) == ([], [], [])

        taken: list[list[str]] = [[], [], []]

        async def reaped() -> bool:  # a beats on, b no more
            await beat(a, "a")
            for seen, now in zip(
                taken, await calls.reap(a.admin.shards[0].scope, 3, expiry, 100), strict=True
            ):
                seen += now
            return taken == [[job.id], [], ["b"]]

        await wait_until(reaped, within=10, every=0.3)
