"""Scheduled jobs start after their time and soon after it."""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta

from rota import Client, JobContext, State, WorkerPool
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer


async def test_job_scheduled_one_second_ahead_starts_on_time(
    client: Client, redis_url: str, namespace: str
) -> None:
    started: list[float] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def tick(ctx: JobContext) -> None:
        started.append(time.time())

    async with pool.running():
        job = await client.enqueue_in(1.0, "tick")
        record = await client.job(job.id)
        assert record is not None and record.state == State.SCHEDULED
        assert record.run_at is not None
        assert (await client.admin.page("scheduled")).total == 1
        await wait_until(lambda: len(started) == 1, within=5)
    late = started[0] - record.run_at
    assert late >= 0
    assert late < 0.2  # a sanity bound, not a benchmark


async def test_enqueue_at_datetime_and_past_time(
    client: Client, redis_url: str, namespace: str
) -> None:
    started: dict[str, float] = {}
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def mark(ctx: JobContext, label: str) -> None:
        started[label] = time.time()

    when = datetime.now(UTC) + timedelta(seconds=0.5)
    await client.enqueue_at(when, "mark", label="future")
    await client.enqueue_at(time.time() - 60, "mark", label="past")
    async with pool.running():
        await wait_until(lambda: len(started) == 2, within=5)
    assert started["future"] >= when.timestamp()
    assert started["past"] < started["future"]


async def test_a_pool_moves_due_jobs_of_names_it_does_not_handle(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def other(ctx: JobContext) -> None: ...

    job = await client.enqueue_in(0.1, "elsewhere")
    async with pool.running():
        await wait_until(lambda: _queued(client, "elsewhere"), within=5)
    record = await client.job(job.id)
    assert record is not None and record.state == State.QUEUED


async def _queued(client: Client, name: str) -> bool:
    (q,) = await client.admin.queues([name])
    return q.size == 1


async def test_scheduled_jobs_start_on_time_whatever_the_servers_hz() -> None:
    """Redis ends a blocking read's timeout only at its next hz tick (every 100 ms with
    the default hz 10, every second with hz 1), so the scheduler waits on a local timer:
    jobs start within milliseconds. hz 1 keeps the bound below generous on a loaded
    machine while a wait on Redis's tick would miss it by far."""
    with RedisServer(["--hz", "1"]) as server:
        pool = WorkerPool(settings=pool_settings(server.url, "hz"))
        started: dict[str, float] = {}

        @pool.job
        async def tick(ctx: JobContext) -> None:
            started[ctx.id] = time.time()

        due: dict[str, float] = {}
        async with Client.from_url(server.url, "hz") as client, pool.running(client=client):
            for i in range(15):
                job = await client.enqueue_in(0.2 + i * 0.037, "tick")
                record = await client.job(job.id)
                assert record is not None and record.run_at is not None
                due[job.id] = record.run_at
            await wait_until(lambda: len(started) == 15, within=10)
    late = [started[i] - at for i, at in due.items()]
    assert min(late) >= 0
    # With hz 10: 53 ms at the median, 105 at worst, when the wait was a BLPOP timeout;
    # about 2.5 now. With hz 1 a BLPOP timeout would be about 500 ms late at the median.
    assert statistics.median(late) < 0.2
