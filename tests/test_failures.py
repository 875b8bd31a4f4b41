"""Failures: retries with backoff, dead with error and reason, skip_dead, Retry, timeouts."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import anyio

import rota
from rota import Client, JobContext, JobSpec, Reason, State, WorkerPool
from tests.helpers import pool_settings, wait_until


def fast_pool(redis_url: str, namespace: str, **changes: object) -> WorkerPool:
    return WorkerPool(settings=pool_settings(redis_url, namespace, **changes))


async def test_retries_with_backoff_then_dead(
    client: Client, redis_url: str, namespace: str
) -> None:
    attempts: list[tuple[int, float]] = []
    delays: list[int] = []
    pool = fast_pool(redis_url, namespace)

    def backoff(n: int) -> float:
        delays.append(n)
        return 0.1 * n

    @pool.job(max_fails=3, backoff=backoff)
    async def flaky(ctx: JobContext) -> None:
        attempts.append((ctx.attempt, time.monotonic()))
        raise ValueError(f"broken on attempt {ctx.attempt}")

    job = await client.enqueue("flaky")
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, State.DEAD), within=10)
    record = await client.job(job.id)
    assert record is not None
    assert [a for a, _ in attempts] == [1, 2, 3]
    assert delays == [1, 2]
    assert attempts[1][1] - attempts[0][1] >= 0.09
    assert attempts[2][1] - attempts[1][1] >= 0.19
    assert (record.state, record.reason) == ("dead", "error")
    assert record.error == "ValueError: broken on attempt 3"
    assert (record.attempts, record.failures) == (3, 3)
    dead = await client.admin.page("dead")
    assert [j.id for j in dead.jobs] == [job.id]
    stats = await client.admin.stats()
    assert (stats["failed"], stats["dead"]) == (3, 1)


async def _state_is(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_skip_dead_drops_the_job(client: Client, redis_url: str, namespace: str) -> None:
    ran: list[int] = []
    pool = fast_pool(redis_url, namespace)

    @pool.job(max_fails=2, skip_dead=True, backoff=lambda n: 0.01)
    async def doomed(ctx: JobContext) -> None:
        ran.append(ctx.attempt)
        raise RuntimeError("no")

    job = await client.enqueue("doomed")
    async with pool.running():
        await wait_until(lambda: len(ran) == 2)
        await wait_until(lambda: _gone(client, job.id))
    assert (await client.admin.page("dead")).total == 0
    assert (await client.admin.stats())["failed"] == 2


async def _gone(client: Client, job_id: str) -> bool:
    return await client.job(job_id) is None


async def test_explicit_retry_runs_again_after_its_delay(
    client: Client, redis_url: str, namespace: str
) -> None:
    times: list[float] = []
    pool = fast_pool(redis_url, namespace, keep_result=60)

    @pool.job(max_fails=5)
    async def again(ctx: JobContext) -> str:
        times.append(time.monotonic())
        if ctx.attempt == 1:
            raise rota.Retry(delay=0.3)
        return "second time"

    job = await client.enqueue("again")
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, State.COMPLETE))
    record = await client.job(job.id)
    assert record is not None
    assert record.result_value == "second time"
    assert record.reason == Reason.RETRY
    assert (record.attempts, record.failures) == (2, 1)
    assert times[1] - times[0] >= 0.29


async def test_timeout_is_a_failure_with_reason_timeout(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = fast_pool(redis_url, namespace)

    @pool.job(timeout=0.1, max_fails=2, backoff=lambda n: 0.01)
    async def slow(ctx: JobContext) -> None:
        await anyio.sleep(10)

    @pool.job(timeout=0.1, max_fails=1)
    def slow_sync() -> None:
        time.sleep(0.5)

    job = await client.enqueue("slow")
    sync_job = await client.enqueue("slow_sync")
    started = time.monotonic()
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, State.DEAD))
        await wait_until(lambda: _state_is(client, sync_job.id, State.DEAD))
    assert time.monotonic() - started < 5
    for jid in (job.id, sync_job.id):
        record = await client.job(jid)
        assert record is not None
        assert record.reason == "timeout"
        assert record.error == "timed out after 0.1 s"
    record = await client.job(job.id)
    assert record is not None and record.attempts == 2


async def test_enqueue_overrides_max_fails_and_timeout(
    client: Client, redis_url: str, namespace: str
) -> None:
    ran: list[int] = []
    pool = fast_pool(redis_url, namespace)

    @pool.job(max_fails=10, backoff=lambda n: 0.01)
    async def sleepy(ctx: JobContext) -> None:
        ran.append(ctx.attempt)
        await anyio.sleep(10)

    job = await client.enqueue("sleepy", max_fails=1, timeout=0.05)
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, State.DEAD))
    record = await client.job(job.id)
    assert record is not None and record.reason == "timeout"
    assert ran == [1]


async def test_abort_raised_by_a_handler(client: Client, redis_url: str, namespace: str) -> None:
    pool = fast_pool(redis_url, namespace, keep_result=60)

    @pool.job
    async def quitter(ctx: JobContext) -> None:
        raise rota.Abort("nothing to do")

    job = await client.enqueue("quitter")
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, State.ABORTED))
    record = await client.job(job.id)
    assert record is not None
    assert (record.reason, record.error, record.attempts) == ("aborted", "nothing to do", 1)
    assert (await client.admin.page("dead")).total == 0


async def test_invalid_args_die_at_once_without_retries(
    client: Client, redis_url: str, namespace: str
) -> None:
    ran: list[int] = []
    pool = fast_pool(redis_url, namespace)

    @pool.job(max_fails=5)
    async def typed(ctx: JobContext, count: int, label: str = "x") -> None:
        ran.append(count)

    wrong_type = await client.enqueue("typed", count="three")
    missing = await client.enqueue("typed", label="y")
    extra = await client.enqueue("typed", count=1, colour="red")
    good = await client.enqueue("typed", 7, "z")
    async with pool.running():
        await wait_until(lambda: _state_is(client, extra.id, State.DEAD))
        await wait_until(lambda: ran == [7])
        await wait_until(lambda: _state_is(client, wrong_type.id, State.DEAD))
        await wait_until(lambda: _state_is(client, missing.id, State.DEAD))
    for jid in (wrong_type.id, missing.id, extra.id):
        record = await client.job(jid)
        assert record is not None
        assert (record.reason, record.attempts) == ("invalid_args", 1)
        assert record.error and record.error.startswith("typed: ")
    assert await client.job(good.id) is None  # complete, keep_result=0


async def test_sync_handlers_run_in_threads(client: Client, redis_url: str, namespace: str) -> None:
    import threading

    threads: set[int] = set()
    lock = threading.Lock()
    running = [0, 0]  # now, most at once
    pool = fast_pool(redis_url, namespace, keep_result=60)

    @pool.job
    def blocking(x: int) -> int:
        threads.add(threading.get_ident())
        with lock:
            running[0] += 1
            running[1] = max(running)
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return x * 2

    jobs = await client.enqueue_many([JobSpec(name="blocking", args=(i,)) for i in range(10)])
    async with pool.running():
        await wait_until(lambda: _state_is(client, jobs[-1].id, State.COMPLETE))
        for job in jobs:
            await wait_until(partial(_state_is, client, job.id, State.COMPLETE))
    assert running[1] >= 2, "sync handlers ran one at a time"  # they run side by side
    assert threading.get_ident() not in threads
    results = [(await client.job(j.id)).result_value for j in jobs]  # type: ignore[union-attr]
    assert results == [i * 2 for i in range(10)]


async def test_middleware_tells_a_timeout_an_abort_and_a_shutdown_apart(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, grace=0.1))
    reasons: dict[str, str | None] = {}
    started: set[str] = set()

    @pool.middleware
    async def note(ctx: JobContext, call_next: Any) -> Any:
        assert isinstance(ctx.args, list)
        try:
            return await call_next()
        finally:  # the handler's await was cancelled: why?
            reasons[ctx.args[0]] = ctx.cancel_reason

    @pool.job(max_fails=1)
    async def sleepy(ctx: JobContext, label: str) -> None:
        started.add(label)
        await anyio.sleep(30)

    await client.enqueue("sleepy", "timeout", timeout=0.2)
    aborted = await client.enqueue("sleepy", "abort")
    await client.enqueue("sleepy", "shutdown")
    async with pool.running(client=client):
        await wait_until(lambda: started == {"timeout", "abort", "shutdown"})
        await client.abort(aborted.id)
        await wait_until(lambda: "timeout" in reasons and "abort" in reasons)
    assert reasons == {"timeout": "timeout", "abort": "abort", "shutdown": "shutdown"}


def _parse_config(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (part.split("=") for part in text.split(","))}


async def test_a_failed_attempt_keeps_its_traceback_in_the_job_log(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = fast_pool(redis_url, namespace)

    @pool.job(max_fails=2, backoff=lambda n: 0.01)
    async def configure(ctx: JobContext, text: str) -> None:
        _parse_config(text)

    job = await client.enqueue("configure", "a=1,b=two")
    async with pool.running(client=client):
        await wait_until(lambda: _state(client, job.id, "dead"), within=20)
    record = await client.job(job.id)
    assert record is not None
    assert record.error == "ValueError: invalid literal for int() with base 10: 'two'"
    lines = await client.job_log(job.id)
    assert [line.split("\n", 1)[0] for line in lines] == [
        "attempt 1 failed:",
        "attempt 2 failed:",
    ]
    assert "Traceback (most recent call last)" in lines[0]
    assert "in _parse_config" in lines[0] and lines[0].endswith(
        "ValueError: invalid literal for int() with base 10: 'two'"
    )


async def _state(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_an_error_text_utf8_cannot_carry_ends_its_job_and_stops_no_pool(
    client: Client, redis_url: str, namespace: str
) -> None:
    """A message with a lone surrogate (a handler's own text, a file name that is no
    UTF-8) is kept escaped: it stopped the finish of every outcome sent with it."""
    pool = fast_pool(redis_url, namespace, keep_result=60.0)

    @pool.job(max_fails=2, backoff=lambda n: 0.05)
    async def odd(ctx: JobContext, how: str) -> None:
        if how == "abort":
            raise rota.Abort("gave up on \udc80")
        if ctx.attempt == 1:
            raise rota.Retry(0.05, "again \ud800")
        raise ValueError("broken \ud800 text")

    @pool.job()
    async def good(ctx: JobContext) -> str:
        return "ok"

    failing = await client.enqueue("odd", "fail")
    aborted = await client.enqueue("odd", "abort")
    async with pool.running():
        await wait_until(lambda: _state_is(client, failing.id, State.DEAD), within=10)
        await wait_until(lambda: _state_is(client, aborted.id, State.ABORTED), within=10)
        after = await client.enqueue("good")
        assert await client.wait(after.id, timeout=10) == "ok"
    dead = await client.job(failing.id)
    assert dead is not None
    assert dead.error == "ValueError: broken \\ud800 text"
    ended = await client.job(aborted.id)
    assert ended is not None
    assert ended.error == "gave up on \\udc80"
