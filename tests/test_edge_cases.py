"""Corners: odd results, waiters of jobs that die in scripts, stats buckets, stray entries."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
import redis

import rota
from rota import Client, JobContext, State, WorkerPool
from rota.protocol.scripts import script
from tests.helpers import pool_settings, rounds, wait_until


async def test_a_result_json_cannot_hold_completes_the_job(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def loop(ctx: JobContext) -> Any:
        circular: list[Any] = []
        circular.append(circular)
        return circular

    @pool.job
    async def fine(ctx: JobContext) -> int:
        return 1

    job = await client.enqueue("loop")
    async with pool.running():
        value = await client.wait(job.id, timeout=5)
        assert await client.wait((await client.enqueue("fine")).id, timeout=5) == 1
    assert isinstance(value, str)
    assert value.startswith("<unencodable list")


@pytest.mark.one_shard("writes one shard's keys")
async def test_waiters_hear_about_jobs_buried_by_scripts(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    redis_sync.hset(p + "job:nameless", mapping={"name": "work"})  # no args: buried on fetch
    redis_sync.lpush(p + "queue:work", "nameless")
    lost = await client.enqueue("work")
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def work(ctx: JobContext) -> None: ...

    async def wait_bad() -> None:
        with pytest.raises(rota.JobFailed, match=r"ended dead \(bad_payload\)") as info:
            await client.wait("nameless", timeout=5)
        assert info.value.reason == "bad_payload"

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_bad)
        await anyio.sleep(0.1)
        async with pool.running():
            await wait_until(lambda: _dead(client, 1))
    # a job whose lease expires max_lost times: its waiter hears 'dead' from the reaper
    assert (await client.job(lost.id)) is None  # completed (keep_result=0)
    job = await client.enqueue("other")

    async def wait_lost() -> None:
        with pytest.raises(rota.JobFailed, match=r"ended dead \(lost\)") as info:
            await client.wait(job.id, timeout=5)
        assert info.value.reason == "lost"

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_lost)
        await anyio.sleep(0.1)
        for _ in range(3):
            now = int(time.time() * 1000)
            await script("fetch")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                [now, 1, "ghost", 10**6, 1, "other"],
                client.admin.shards[0].script_mode,
            )
            await anyio.sleep(0.01)
            await script("reap")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                [int(time.time() * 1000), 3, 15000, 100],
                client.admin.shards[0].script_mode,
            )


async def _dead(client: Client, n: int) -> bool:
    return (await client.admin.page("dead")).total == n


@pytest.mark.one_shard("reads one shard's keys")
async def test_stats_are_bucketed_by_utc_day_and_minute(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60, keep_none=60))

    @pool.job
    async def tick(ctx: JobContext) -> None: ...

    before = datetime.now(UTC)
    async with pool.running():
        await client.wait((await client.enqueue("tick")).id, timeout=5)
    after = datetime.now(UTC)
    p = "{" + namespace + "}:stats:"
    days = {before.strftime("%Y%m%d"), after.strftime("%Y%m%d")}
    minutes = {before.strftime("%Y%m%d%H%M"), after.strftime("%Y%m%d%H%M")}
    assert sum(int(redis_sync.hget(p + d, "processed") or 0) for d in days) == 1
    assert sum(int(redis_sync.hget(p + m, "processed:tick") or 0) for m in minutes) == 1
    assert 0 < min(redis_sync.ttl(p + m) for m in minutes if redis_sync.exists(p + m)) <= 7200


def test_lua_calendar_matches_python_for_many_dates(redis_sync: redis.Redis) -> None:
    """The bucket names come from a civil-date algorithm in Lua: compare it with Python."""
    src = script("finish").source.split("-- Write the counters")[0]
    probe = (
        src + "\nlocal out = {}\nfor i = 1, #ARGV do local d, m = buckets(tonumber(ARGV[i]))"
        " out[#out + 1] = m end\nreturn out"
    )
    stamps = [0, 951782400000, 951868799999, 1709164800000, 4102444799000, 1795263569234]
    stamps += [int(t) for t in range(946684800000, 4102444800000, 86400000 * 37 + 3_600_123)]
    got = redis_sync.eval(probe, 1, "{x}:", *stamps)
    want = [datetime.fromtimestamp(t / 1000, UTC).strftime("%Y%m%d%H%M") for t in stamps]
    assert [g.decode() for g in got] == want


async def test_odd_keys_and_options(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    redis_sync.set("{" + namespace + "}:job:plain-string", "x")
    assert await client.job("plain-string") is None
    with pytest.raises(ValueError, match="max_fails"):
        await client.enqueue("x", max_fails=0)
    with pytest.raises(ValueError, match="unique_ttl"):
        await client.enqueue("x", unique="k", unique_ttl=0)


@pytest.mark.one_shard("writes one shard's keys")
async def test_a_stray_queue_entry_of_a_scheduled_job_does_not_run_it_early(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    job = await client.enqueue_in(60, "later")
    redis_sync.lpush("{" + namespace + "}:queue:later", job.id)  # a confused producer
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def later(ctx: JobContext) -> None:
        ran.append(ctx.id)

    async with pool.running():
        await wait_until(lambda: _queue_empty(client, "later"))
        await rounds(pool)  # what the fetch of the stray entry leased has been taken
    assert ran == []
    record = await client.job(job.id)
    assert record is not None
    assert record.state == State.SCHEDULED
    assert (await client.admin.stats())["stale_entries"] == 1


async def _queue_empty(client: Client, name: str) -> bool:
    (q,) = await client.admin.queues([name])
    return q.size == 0


@pytest.mark.one_shard("reads one shard's keys")
async def test_abort_keeps_the_record_as_long_as_asked(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    started = anyio.Event()
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def long(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep(30)

    job = await client.enqueue("long")
    async with pool.running():
        await started.wait()
        assert await client.abort(job.id, keep=120) == "running"
        with pytest.raises(rota.JobFailed, match=r"ended aborted"):
            await client.wait(job.id, timeout=5)
    ttl = redis_sync.pttl("{" + namespace + "}:job:" + job.id)
    assert 100_000 < ttl <= 120_000
