"""The hand-off between fetcher and workers, and prefetching, on their own and in a pool."""

from __future__ import annotations

import collections
import time
from typing import cast

import anyio

from rota import Client, JobContext, WorkerPool
from rota.protocol.shards import new_id_in
from rota.worker.rounds import REAP
from tests.helpers import pool_settings, rounds, wait_until, waiting_on_wake_lists
from tests.redis_server import RedisServer


async def test_prefetched_jobs_keep_their_leases_and_go_back_on_drain(
    client: Client, redis_url: str, namespace: str
) -> None:
    """Jobs leased ahead wait longer than the lease behind a slow one: the heartbeat
    extends their leases, so none is reclaimed and run twice; stopping gives the ones
    not started back to their queue. Every job is counted."""
    runs: collections.Counter[str] = collections.Counter()
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, concurrency=2, prefetch=2, lease=0.6, heartbeat_interval=0.1
        )
    )

    @pool.job
    async def work(ctx: JobContext, seconds: float) -> None:
        runs[ctx.id] += 1
        await anyio.sleep(seconds)

    fast = [await client.enqueue("work", seconds=0.01) for _ in range(20)]
    async with pool.running() as rt:
        await wait_until(lambda: all(runs[j.id] for j in fast))
        # In one shard's queue, so that the slow ones start first (FIFO holds within a
        # shard only): over four shards the rest sometimes ran before them.
        k = len(client.admin.shards)
        slow = [await client.enqueue("work", seconds=1.5, job_id=new_id_in(0, k)) for _ in range(2)]
        rest = [
            await client.enqueue("work", seconds=0.01, job_id=new_id_in(0, k)) for _ in range(2)
        ]
        await wait_until(lambda: all(runs[j.id] for j in slow))
        await wait_until(lambda: len(rt.handoff.waiting()) == 2)
        await anyio.sleep(1.0)  # longer than the lease: the heartbeat must hold them
        await rounds(pool, REAP)  # a reaper pass since, which would take them back
        assert sorted(j.id for j in rt.handoff.waiting()) == sorted(j.id for j in rest)
        late = [await client.enqueue("work", seconds=0.01) for _ in range(3)]
        await wait_until(lambda: all(runs[j.id] for j in rest), within=5)
    assert max(runs.values()) == 1, runs
    queued = {q for shard_queue in await _queues(client, "work") for q in shard_queue}
    ran = {j.id for j in late if runs[j.id]}
    assert {j.id for j in late} == ran | queued
    for shard in client.admin.shards:
        assert await shard.redis.zcard(shard.keys.running("work")) == 0


async def _queues(client: Client, name: str) -> list[list[str]]:
    """Each shard's queue of ``name``, the next to run first (a fetch pops at the tail)."""
    return [
        [
            q.decode()
            for q in reversed(cast(list[bytes], await s.redis.lrange(s.keys.queue(name), 0, -1)))
        ]
        for s in client.admin.shards
    ]


async def test_an_idle_pool_stops_at_once_and_a_wake_starts_a_job_in_one_write(
    client: Client, redis_url: str, namespace: str
) -> None:
    """An idle fetcher sends its BLPOP and the fetch behind it in one write: a new job
    starts without a further round trip, its lease counted from the server's clock; and
    a stopping pool ends that wait (CLIENT UNBLOCK) instead of waiting out wake_timeout."""
    started: list[float] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, wake_timeout=30, keep_result=60))

    @pool.job
    async def ping(ctx: JobContext) -> None:
        started.append(time.time())

    async with pool.running():
        await wait_until(lambda: waiting_on_wake_lists(redis_url))  # the fetcher waits
        before = time.time()
        job = await client.enqueue("ping")
        await wait_until(lambda: len(started) == 1, within=2)
        shard = await client.admin.shard_holding(job.id)
        record = await shard.redis.hmget(shard.keys.job(job.id), "started_at", "attempts")
        assert record[0] is not None and record[1] is not None
        assert int(record[1]) == 1
        assert abs(int(record[0]) / 1000 - before) < 1.0  # the server's clock, not stale
        await wait_until(lambda: waiting_on_wake_lists(redis_url))  # its 30 s wait again
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 15  # the 30 s BLPOP was unblocked, not waited out
    for shard in client.admin.shards:
        assert await shard.redis.zcard(shard.keys.running("ping")) == 0


async def test_a_user_refused_client_commands_still_runs_and_stops(
    fresh_redis_server: RedisServer,
) -> None:
    """Without CLIENT (ACL), the fetcher cannot learn its id to be unblocked: it still
    runs jobs, and a stopping pool waits out its BLPOP (wake_timeout) instead."""
    r = fresh_redis_server.client()
    r.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                  commands=["+@all", "-client"])  # fmt: skip
    url = f"redis://app:pw@127.0.0.1:{fresh_redis_server.port}/0"
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(url, "acl", wake_timeout=0.5))

    @pool.job
    async def ping(ctx: JobContext) -> None:
        ran.append(ctx.id)

    async with Client.from_url(url, "acl") as client, pool.running():
        await wait_until(lambda: waiting_on_wake_lists(fresh_redis_server.url))
        await client.enqueue("ping")
        await wait_until(lambda: len(ran) == 1, within=3)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 10  # the 0.5 s BLPOP is waited out, and no more


async def test_jobs_given_back_on_drain_keep_their_order(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, concurrency=2, prefetch=2, grace=0.1)
    )
    runs: list[str] = []

    @pool.job
    async def work(ctx: JobContext, seconds: float) -> None:
        runs.append(ctx.id)
        await anyio.sleep(seconds)

    warm = [await client.enqueue("work", seconds=0.001) for _ in range(4)]
    async with pool.running() as rt:
        await wait_until(lambda: len(runs) == len(warm))
        slow = [await client.enqueue("work", seconds=5) for _ in range(2)]
        await wait_until(lambda: all(j.id in runs for j in slow))
        fast = [await client.enqueue("work", seconds=0.001) for _ in range(6)]
        # The pool's room (2 running, 2 prefetched), whatever the shards the fast jobs
        # went to: over K shards each fetcher once leased what it reckoned before its
        # wait, 6 here.
        await wait_until(lambda: len(rt.handoff.waiting()) == 2)
    slow_ids = {j.id for j in slow}
    given_back: list[str] = []
    for next_up in await _queues(client, "work"):  # FIFO holds within a shard
        cancelled = sum(1 for q in next_up if q in slow_ids)
        assert set(next_up[:cancelled]) == slow_ids & set(next_up)  # at the front
        # the leased ones, then the rest, in order
        assert next_up[cancelled:] == [j.id for j in fast if j.id in next_up]
        given_back += next_up
    assert sorted(given_back) == sorted(slow_ids | {j.id for j in fast})
