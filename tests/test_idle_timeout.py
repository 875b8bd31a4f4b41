"""A handler's ``idle_timeout``: an attempt that goes that long without ``ctx.checkin``
nor ``ctx.progress`` is cancelled with reason ``idle`` (in the record, the API, the web
and the log line) and retried by ``max_fails``; the per-attempt ``timeout`` beside it
still applies, and whichever comes first says why."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import anyio.from_thread
import httpx
import pytest

from rota import Client, JobContext, State, WorkerPool
from rota.web import create_app
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(60)

BASE = "http://127.0.0.1:5040"  # a host the web's middleware takes


def _pool(redis_url: str, namespace: str, **changes: Any) -> WorkerPool:
    return WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60, **changes))


async def _ended(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def _silent_one_ends_idle_the_other_completes(
    client: Client, pool: WorkerPool, silent_name: str, talking_name: str, result: str
) -> None:
    """Runs one job of each handler side by side: the silent one is dead as ``idle``, the
    one that keeps talking completes with ``result``."""
    silent, talking = await client.enqueue(silent_name), await client.enqueue(talking_name)
    async with pool.running():
        await wait_until(lambda: _ended(client, silent.id, State.DEAD), within=15)
        await wait_until(lambda: _ended(client, talking.id, State.COMPLETE), within=15)
    record = await client.job(silent.id)
    assert record is not None and record.reason == "idle"
    record = await client.job(talking.id)
    assert record is not None and record.result_value == result


async def test_an_attempt_that_checks_in_in_time_completes(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace)

    @pool.job(idle_timeout=1, max_fails=1)
    async def steady(ctx: JobContext) -> str:
        until = time.monotonic() + 3
        while time.monotonic() < until:
            await ctx.checkin("working")
            await anyio.sleep(0.2)
        return "done"

    job = await client.enqueue("steady")
    async with pool.running():
        await wait_until(lambda: _ended(client, job.id, State.COMPLETE), within=15)
    record = await client.job(job.id)
    assert record is not None
    assert (record.result_value, record.attempts, record.reason) == ("done", 1, None)


async def test_an_attempt_gone_silent_is_cancelled_as_idle_retried_then_dead(
    client: Client, redis_url: str, namespace: str
) -> None:
    """Checkins stop after 0.5 s: the cancel comes no sooner than 1 s after the last one
    (and long before the handler's 30 s wait ends), says ``idle``, and the job runs
    again; at ``max_fails`` it is dead."""
    pool = _pool(redis_url, namespace)
    lines: list[dict[str, Any]] = []
    pool.job_line = lambda level, fields: lines.append(fields)
    silences: list[tuple[int, float, str | None]] = []

    @pool.job(idle_timeout=1, max_fails=2, backoff=lambda n: 0.01)
    async def stalls(ctx: JobContext) -> None:
        begun = last = time.monotonic()
        try:
            while time.monotonic() - begun < 0.45:
                last = time.monotonic()  # before the checkin: its clock restarts within it
                await ctx.checkin("fine so far")
                await anyio.sleep(0.1)
            await anyio.sleep(30)  # a socket without a timeout of its own
        except asyncio.CancelledError:
            silences.append((ctx.attempt, time.monotonic() - last, ctx.cancel_reason))
            raise

    job = await client.enqueue("stalls")
    async with pool.running():
        await wait_until(lambda: _ended(client, job.id, State.DEAD), within=15)
    assert [(a, why) for a, _, why in silences] == [(1, "idle"), (2, "idle")]
    # never early; how late follows the host (0.0-0.5 s quiet, 1.0 s once under load)
    for _, silent, _ in silences:
        assert 1.0 <= silent < 10, silences
    record = await client.job(job.id)
    assert record is not None
    assert (record.reason, record.attempts, record.failures) == ("idle", 2, 2)
    assert record.error == "idle: no checkin nor progress for 1 s"
    outcomes = [(f["attempt"], f["outcome"], f.get("reason")) for f in lines]
    assert outcomes == [(1, "retry", "idle"), (2, "dead", "idle")]
    app = create_app(pool_settings(redis_url, namespace), client=client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        assert (await http.get(f"/api/jobs/{job.id}")).json()["reason"] == "idle"
        assert '<span class="badge bad">idle</span>' in (await http.get(f"/jobs/{job.id}")).text


async def test_progress_restarts_the_idle_clock_too(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace)

    @pool.job(idle_timeout=0.5, max_fails=1)
    async def reports(ctx: JobContext) -> str:
        for step in range(10):
            await ctx.progress(step * 10)
            await anyio.sleep(0.2)
        return "reported"

    @pool.job(idle_timeout=0.5, max_fails=1)
    async def mute(ctx: JobContext) -> str:
        await anyio.sleep(2)
        return "never"

    await _silent_one_ends_idle_the_other_completes(client, pool, "mute", "reports", "reported")


@pytest.mark.parametrize(
    ("limits", "reason"),  # (timeout, idle_timeout)
    [((0.3, 5.0), "timeout"), ((5.0, 0.3), "idle")],
)
async def test_the_earliest_of_timeout_and_idle_timeout_wins_and_says_so(
    client: Client, redis_url: str, namespace: str, limits: tuple[float, float], reason: str
) -> None:
    pool = _pool(redis_url, namespace)

    @pool.job(timeout=limits[0], idle_timeout=limits[1], max_fails=1)
    async def hangs(ctx: JobContext) -> None:
        await anyio.sleep(30)

    started = time.monotonic()
    job = await client.enqueue("hangs")
    async with pool.running():
        await wait_until(lambda: _ended(client, job.id, State.DEAD), within=15)
    assert time.monotonic() - started < 4
    record = await client.job(job.id)
    assert record is not None and record.reason == reason


async def test_a_plain_def_handler_is_left_as_a_timeout_leaves_it_unless_it_checks_in(
    client: Client, redis_url: str, namespace: str
) -> None:
    """A thread cannot be cancelled: a silent ``def`` handler's attempt ends ``idle`` while
    its thread runs on, as at its ``timeout``; one that checks in from its thread
    (``anyio.from_thread.run``) keeps its attempt."""
    pool = _pool(redis_url, namespace)

    @pool.job(idle_timeout=0.3, max_fails=1)
    def blocks() -> None:
        time.sleep(1)

    @pool.job(idle_timeout=0.3, max_fails=1)
    def talks(ctx: JobContext) -> str:
        for _ in range(8):
            time.sleep(0.1)
            anyio.from_thread.run(ctx.checkin, "still here")
        return "talked"

    await _silent_one_ends_idle_the_other_completes(client, pool, "blocks", "talks", "talked")


async def test_how_long_a_running_job_has_been_silent_is_read_from_its_pools_snapshot(
    client: Client, redis_url: str, namespace: str
) -> None:
    """``heard_at`` follows the checkins (a heartbeat later); before any, it is the start."""
    pool = _pool(redis_url, namespace, heartbeat_interval=0.1)
    talk = anyio.Event()

    @pool.job(idle_timeout=30)
    async def waits(ctx: JobContext) -> None:
        await talk.wait()
        await anyio.sleep(0.3)
        await ctx.checkin("spoke")
        await anyio.sleep(30)

    await client.enqueue("waits")
    async with pool.running():
        await wait_until(lambda: _running_count(client, 1), within=10)
        (before,) = await client.admin.running()
        assert before.heard_at == before.since
        talk.set()

        async def spoke() -> bool:
            (now,) = await client.admin.running()
            return now.message == "spoke"

        await wait_until(spoke, within=10)
        (after,) = await client.admin.running()
        assert after.since + 0.25 <= after.heard_at <= time.time()


async def _running_count(client: Client, n: int) -> bool:
    return len(await client.admin.running()) == n
