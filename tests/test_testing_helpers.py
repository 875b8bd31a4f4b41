"""rota.testing: users' tests run handlers through a real pool on a throwaway Redis."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import rota
import rota.testing
from rota import JobContext, WorkerPool


def make_pool() -> WorkerPool:
    pool = WorkerPool(concurrency=2)

    @pool.job
    async def greet(ctx: JobContext, name: str) -> str:
        return f"hello {name}"

    @pool.job(max_fails=1)
    async def broken(ctx: JobContext) -> None:
        raise ValueError("nope")

    return pool


async def test_run_job_returns_the_result_and_raises_for_failures() -> None:
    pool = make_pool()
    assert await rota.testing.run_job(pool, "greet", name="Ada") == "hello Ada"
    with pytest.raises(rota.JobFailed, match=r"ended dead \(error\): ValueError: nope") as info:
        await rota.testing.run_job(pool, "broken")
    assert (info.value.reason, info.value.error) == ("error", "ValueError: nope")
    with pytest.raises(rota.JobFailed, match=r"ended dead \(invalid_args\)") as info:
        await rota.testing.run_job(pool, "greet", name=3)
    assert info.value.reason == "invalid_args"


async def test_pool_client_on_a_given_redis(redis_url: str) -> None:
    pool = make_pool()
    async with rota.testing.pool_client(pool, redis_url, keep_result=60) as client:
        jobs = [await client.enqueue("greet", name=str(i)) for i in range(5)]
        assert [await client.wait(j.id, timeout=5) for j in jobs] == [
            f"hello {i}" for i in range(5)
        ]
        assert client.namespace.startswith("test-")


async def test_a_retried_job_runs_without_the_backoff_wait() -> None:
    pool = WorkerPool(concurrency=2)
    tries: list[int] = []

    @pool.job(max_fails=3)  # the default backoff waits 15 s and more before a retry
    async def flaky(ctx: JobContext) -> str:
        tries.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return "done"

    with anyio.fail_after(10):
        assert await rota.testing.run_job(pool, "flaky") == "done"
    assert tries == [1, 2, 3]
    assert pool.handlers["flaky"].backoff is not rota.testing._no_wait  # its own is back


async def test_your_own_redis_keeps_no_keys_of_the_test(redis_url: str, redis_sync: Any) -> None:
    pool = make_pool()
    before = set(redis_sync.keys("{test-*"))
    async with rota.testing.pool_client(pool, redis_url) as client:
        job = await client.enqueue("greet", name="Ada")
        assert await client.wait(job.id, timeout=5) == "hello Ada"
        assert set(redis_sync.keys("{" + client.namespace + "}:*"))
        namespace = client.namespace
    assert redis_sync.keys("{" + namespace + "}:*") == []
    assert set(redis_sync.keys("{test-*")) == before


async def test_the_client_takes_the_pools_settings() -> None:
    # One limit for the producer and the pool: an enqueue the pool would bury as
    # bad_payload is refused at once.
    pool = make_pool()
    async with rota.testing.pool_client(pool, max_args_bytes=100) as client:
        assert client.options.max_args_bytes == 100
        with pytest.raises(rota.PayloadTooLarge, match="over the limit of 100"):
            await client.enqueue("greet", name="x" * 200)
