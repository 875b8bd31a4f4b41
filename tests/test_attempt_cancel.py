"""A cancelled attempt leaves its worker as it found it.

A timeout, an abort or the pool's shutdown cancels the worker's task for one attempt.
A handler may swallow that cancellation (and return): the next attempt on the same
worker must start with no cancellation pending, or its own timeouts and cancel scopes
would misread whose cancellation they see. A cancellation lost in the handler's awaits
(Python 3.11's ``asyncio.wait_for``, in redis-py's send, returns instead of raising when
the cancellation comes as the write ends) is made again: an abort takes effect all the
same. A handler's own TimeoutError is its failure, not the job's timeout.
"""

from __future__ import annotations

import asyncio

import anyio

from rota import Client, JobContext, State, WorkerPool
from tests.helpers import pool_settings, wait_until


async def test_a_swallowed_cancellation_does_not_reach_the_next_attempt(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, concurrency=1, prefetch=0, keep_result=60)
    )
    seen: list[int] = []

    @pool.job(timeout=0.05)
    async def stubborn(ctx: JobContext) -> str:
        try:
            await anyio.sleep(5)
        except asyncio.CancelledError:  # swallowed: the attempt returns all the same
            return "swallowed"
        return "slept"

    @pool.job(timeout=5)
    async def next_one(ctx: JobContext) -> str:
        task = asyncio.current_task()
        assert task is not None
        seen.append(task.cancelling())
        try:
            async with asyncio.timeout(0.05):  # its own timeout fires as its own
                await anyio.sleep(5)
        except TimeoutError:
            pass
        with anyio.move_on_after(0.05):
            await anyio.sleep(5)
        await anyio.sleep(0.2)  # and nothing cancels it afterwards
        return "ran"

    first = await client.enqueue("stubborn")
    second = await client.enqueue("next_one")
    async with pool.running():
        assert await client.wait(first.id, timeout=10) == "swallowed"
        assert await client.wait(second.id, timeout=10) == "ran"
    assert seen == [0]


async def test_an_abort_whose_cancellation_was_swallowed_is_made_again(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, heartbeat_interval=0.2, lease=2.0, keep_result=60
        )
    )
    swallowed = anyio.Event()

    @pool.job
    async def long(ctx: JobContext) -> str:
        try:
            await anyio.sleep(60)
        except asyncio.CancelledError:  # lost, as asyncio.wait_for of Python 3.11 loses it
            swallowed.set()
        for _ in range(300):  # runs on, as a job whose abort was lost would
            await anyio.sleep(0.1)
        return "ran to its end"

    job = await client.enqueue("long")
    async with pool.running():
        await wait_until(lambda: _running(client, job.id), within=10)
        assert await client.abort(job.id) == "running"
        with anyio.fail_after(10):
            await swallowed.wait()
        await wait_until(lambda: _ended(client, job.id), within=10)
        record = await client.job(job.id)
        assert record is not None
        assert (record.state, record.reason) == (State.ABORTED, "aborted")


async def _running(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == State.RUNNING


async def _ended(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state != State.RUNNING


async def test_a_handlers_own_timeout_error_is_an_error_not_a_timeout(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(timeout=5, max_fails=1)
    async def own(ctx: JobContext) -> None:
        async with asyncio.timeout(0.01):
            await anyio.sleep(1)

    job = await client.enqueue("own")
    async with pool.running():
        await wait_until(lambda: _dead(client, job.id), within=10)
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.reason) == (State.DEAD, "error")
    assert record.error is not None and record.error.startswith("TimeoutError")


async def _dead(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == State.DEAD
