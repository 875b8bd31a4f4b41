"""Leaving ``pool.running()`` drains: jobs longer than the grace go back to the front."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import MutableMapping, Sequence
from typing import Any, cast

import anyio
import pytest
import redis
from structlog.testing import capture_logs

from rota import Client, JobContext, JobSpec, State, WorkerPool
from rota.worker.fetcher import Fetcher
from rota.worker.heartbeat import Reaper
from rota.worker.runtime import Fetched
from rota.worker.threads import HOLDING, LEFT
from tests.helpers import pool_settings, wait_until


@pytest.mark.one_shard("reads one shard's queue")
async def test_drain_waits_for_short_jobs_and_requeues_long_ones(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    finished: list[str] = []
    started: list[str] = []

    def make_pool(grace: float) -> WorkerPool:
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, grace=grace, keep_result=60))

        @pool.job(max_fails=1)
        async def work(ctx: JobContext, seconds: float) -> None:
            started.append(ctx.id)
            if ctx.attempt == 1:  # the second run of the long job is quick
                await anyio.sleep(seconds)
            finished.append(ctx.id)

        return pool

    short = await client.enqueue("work", seconds=0.2)
    long = await client.enqueue("work", seconds=30)
    async with make_pool(grace=0.5).running():
        await wait_until(lambda: len(started) == 2)
    assert finished == [short.id]
    record = await client.job(long.id)
    assert record is not None
    assert (record.state, record.attempts, record.failures) == (State.QUEUED, 1, 0)
    assert redis_sync.lrange("{" + namespace + "}:queue:work", 0, -1) == [long.id.encode()]
    assert redis_sync.zcard("{" + namespace + "}:running:work") == 0

    # the next pool takes it first and finishes it
    await client.enqueue("work", seconds=0)
    started.clear()
    async with make_pool(grace=40).running():
        await wait_until(lambda: long.id in finished, within=40)
    assert started[0] == long.id


async def test_run_returns_when_the_shutdown_event_is_set(
    client: Client, redis_url: str, namespace: str
) -> None:
    done: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def quick(ctx: JobContext, i: int) -> None:
        done.append(i)

    shutdown = anyio.Event()
    for i in range(3):
        await client.enqueue("quick", i=i)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.run(redis_url, shutdown=shutdown))
            await wait_until(lambda: len(done) == 3)
            shutdown.set()
    assert sorted(done) == [0, 1, 2]
    assert pool.runtime is None


class _Boom(BaseException):
    """Not an Exception: a handler's failure does not catch it, so it crashes the pool."""


async def test_a_crashing_pool_task_ends_the_pool_instead_of_hanging(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def crash(ctx: JobContext) -> None:
        raise _Boom

    await client.enqueue("crash")
    with (
        anyio.fail_after(10),
        pytest.raises(BaseExceptionGroup, match="unhandled errors in a TaskGroup") as info,
    ):
        async with pool.running():
            await anyio.sleep(30)
    assert info.group_contains(_Boom)
    assert pool.runtime is None


@pytest.mark.one_shard("reads one shard's keys")
@pytest.mark.timeout(60)
async def test_drain_ends_while_every_fetch_finds_free_slots(
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Quick jobs free their slots while the (shielded) fetch is in flight, so the
    fetcher never waits outside its shield; a drain must stop it all the same, although
    its workers hand every fetched job straight back."""
    fetch = Fetcher._fetch

    async def slow_fetch(self: Fetcher, want: int, *args: Any, **kwargs: Any) -> list[Fetched]:
        jobs = await fetch(self, want, *args, **kwargs)
        await anyio.sleep(0.02)  # a slow round trip: the workers free slots meanwhile
        return jobs

    monkeypatch.setattr(Fetcher, "_fetch", slow_fetch)
    done: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=4, grace=0.5))

    started = itertools.count()

    @pool.job
    async def quick(ctx: JobContext) -> None:
        await anyio.sleep(next(started) % 4 * 0.008)  # ends spread over the next fetch
        done.append(ctx.id)

    jobs = await client.enqueue_many([JobSpec(name="quick") for _ in range(3000)])
    async with pool.running():
        await wait_until(lambda: len(done) >= 100)
        stopping = anyio.current_time()
    assert anyio.current_time() - stopping < 5
    p = "{" + namespace + "}:"
    queued = {i.decode() for i in cast(list[bytes], redis_sync.lrange(p + "queue:quick", 0, -1))}
    assert redis_sync.zcard(p + "running:quick") == 0
    assert queued | set(done) == {j.id for j in jobs}
    assert not queued & set(done)


@pytest.mark.one_shard("reads one shard's queue")
async def test_a_second_signal_still_puts_the_cancelled_jobs_back_at_once(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A second signal skips the wait for running jobs, not the outcomes that put
    them back: with Redis up the job is queued again at once (no lease to wait out),
    and no line says that Redis was unavailable."""
    started = anyio.Event()
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, grace=30, keep_result=60))

    @pool.job()
    async def long(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep(60)

    job = await client.enqueue("long")
    force = anyio.Event()
    with capture_logs() as logs, anyio.fail_after(10):
        async with pool.running(force=force):
            await started.wait()
            force.set()  # the second SIGTERM, before the drain starts
    record = await client.job(job.id)
    assert record is not None and record.state == State.QUEUED
    assert redis_sync.lrange("{" + namespace + "}:queue:long", 0, -1) == [job.id.encode()]
    assert not [e for e in logs if "not recorded" in e["event"]], logs


def _holding_pool(
    redis_url: str, namespace: str, started: threading.Event, release: threading.Event
) -> WorkerPool:
    """A pool with a grace of 1 s whose plain ``def`` handler runs until ``release``."""
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, grace=1, keep_result=60, lease=1.0, heartbeat_interval=0.2
        )
    )

    @pool.job(name="hold")
    def hold(ctx: JobContext) -> str:
        started.set()
        release.wait(60)
        return "done"

    return pool


def _events(logs: Sequence[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == event]


@pytest.mark.one_shard("reads one shard's leases")
async def test_a_handler_thread_past_grace_keeps_its_job_until_it_ends(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A thread cannot be cancelled: its job is not put back while it runs (another pool
    would run it twice), its lease is kept, and its real outcome is recorded when it
    ends. The log names the job that holds the pool."""
    started, release = threading.Event(), threading.Event()
    first = _holding_pool(redis_url, namespace, started, release)
    ran: list[str] = []
    other = WorkerPool(
        settings=pool_settings(redis_url, namespace, keep_result=60, heartbeat_interval=0.2)
    )

    @other.job(name="hold")
    def hold(ctx: JobContext) -> str:
        ran.append(ctx.id)
        return "done"

    job = await client.enqueue("hold")
    lease = functools.partial(redis_sync.zscore, "{" + namespace + "}:running:hold", job.id)
    stop = anyio.Event()
    try:
        with capture_logs() as logs, anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(first.run, redis_url, shutdown=stop))
                await wait_until(started.is_set)
                stop.set()
                await wait_until(lambda: bool(_events(logs, HOLDING)))
                leased = cast(float, lease())
                # Queued after it: the other pool runs this one first if it is put back.
                probe = await client.enqueue("hold")
                async with other.running() as rt:
                    await wait_until(lambda: ran == [probe.id])
                    # Two leases later: still extended, and no reaper takes it.
                    await wait_until(lambda: cast(float, lease()) > leased + 2000, within=15)
                    await Reaper(rt).reap()
                    record = await client.job(job.id)
                    assert record is not None and record.state == State.RUNNING
                    assert not _events(logs, "pool stopped")
                    release.set()
                    await wait_until(lambda: bool(_events(logs, "pool stopped")))
                assert ran == [probe.id]
    finally:
        release.set()
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.attempts, record.result) == (State.COMPLETE, 1, '"done"')
    (holding,) = _events(logs, HOLDING)
    assert [(j["job_id"], j["job_name"]) for j in holding["jobs"]] == [(job.id, "hold")]
    assert holding["jobs"][0]["running_s"] >= 1
    (stopped,) = [e for e in _events(logs, "pool stopped") if e["pool"] == holding["pool"]]
    assert "threads_running" not in stopped


@pytest.mark.one_shard("reads one shard's queue")
async def test_a_second_signal_leaves_a_handler_thread_and_its_job_to_the_lease(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A second signal ends the wait for a handler thread: the pool stops, says which
    job it left, and does not put it back (the thread still runs it)."""
    started, release = threading.Event(), threading.Event()
    pool = _holding_pool(redis_url, namespace, started, release)
    job = await client.enqueue("hold")
    stop, force = anyio.Event(), anyio.Event()
    try:
        with capture_logs() as logs, anyio.fail_after(30):
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    async with pool.running(force=force):
                        await stop.wait()

                tg.start_soon(run)
                await wait_until(started.is_set)
                stop.set()
                await wait_until(lambda: bool(_events(logs, HOLDING)))
                force.set()
            assert pool.threads.still_running()[0]["job_id"] == job.id
            record = await client.job(job.id)
            assert record is not None and record.state == State.RUNNING
            assert redis_sync.llen("{" + namespace + "}:queue:hold") == 0
    finally:
        release.set()
    (left,) = _events(logs, LEFT)
    assert [(j["job_id"], j["job_name"]) for j in left["jobs"]] == [(job.id, "hold")]
    (line,) = [e for e in _events(logs, "job") if e["job_id"] == job.id]
    assert (line["outcome"], line["reason"]) == ("left", "shutdown")
    (stopped,) = _events(logs, "pool stopped")
    assert [j["job_id"] for j in stopped["threads_running"]] == [job.id]
