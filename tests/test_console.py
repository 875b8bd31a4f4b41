"""The operator's console in the client (:mod:`rota.client.console`): edit then retry
in place (one script, refused once the job left its set), a periodic job run now (its
schedule untouched, one job per second however often asked, none beside the fire time
of the same second), a job set's page ordered and cut to a window of its time, and the
queues listed in another order. Real Redis and real pools; over 4 shards too
(``ROTA_TEST_SHARDS=4``)."""

from __future__ import annotations

import time

import anyio
import pytest

from rota import Client, JobContext, JobNotFound, PayloadTooLarge, Retry, WorkerPool
from rota.client import console
from tests.helpers import pool_settings, rounds, step_pool, wait_until

pytestmark = pytest.mark.timeout(60)


async def _dead(client: Client, redis_url: str, namespace: str) -> str:
    """A job of ``step`` that died (its label starts with "fail")."""
    job = await client.enqueue("step", label="fail-first")
    async with step_pool(redis_url, namespace).running():
        await wait_until(lambda: _state(client, job.id, "dead"), within=15)
    return job.id


async def _state(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_edit_then_retry_runs_the_same_job_with_the_new_args(
    client: Client, redis_url: str, namespace: str
) -> None:
    job_id = await _dead(client, redis_url, namespace)
    pool = step_pool(redis_url, namespace)
    async with pool.running():
        await console.retry_edited(client, "dead", job_id, {"label": "fixed"})
        await wait_until(lambda: _state(client, job_id, "complete"), within=15)
    record = await client.job(job_id)
    assert record is not None
    assert (record.args, record.result, record.failures) == ('{"label":"fixed"}', '"FIXED"', 0)
    assert await client.admin.in_set("dead", [job_id]) == []
    # It left the set: a second edit of it is refused, and writes nothing.
    with pytest.raises(JobNotFound, match=r"not among the dead jobs .*nothing changed"):
        await console.retry_edited(client, "dead", job_id, {"label": "again"})
    record = await client.job(job_id)
    assert record is not None and record.args == '{"label":"fixed"}'


async def test_edit_then_retry_refuses_bad_args_and_keeps_the_job_dead(
    client: Client, redis_url: str, namespace: str
) -> None:
    job_id = await _dead(client, redis_url, namespace)
    with pytest.raises(TypeError, match="a JSON array or object, not str"):
        await console.retry_edited(client, "dead", job_id, "fixed")
    with pytest.raises(TypeError, match="NaN"):
        await console.retry_edited(client, "dead", job_id, [float("nan")])
    with pytest.raises(PayloadTooLarge, match="over the limit of"):
        await console.retry_edited(client, "dead", job_id, ["x" * 2_000_000])
    with pytest.raises(ValueError, match="only retry and dead jobs"):
        await console.retry_edited(client, "scheduled", job_id, [])  # type: ignore[arg-type]
    with pytest.raises(JobNotFound, match="not among the retry jobs"):
        await console.retry_edited(client, "retry", job_id, ["fixed"])
    assert await client.admin.in_set("dead", [job_id]) == [job_id]
    record = await client.job(job_id)
    assert record is not None and record.args == '{"label":"fail-first"}'


async def test_edit_then_retry_takes_a_job_of_the_retry_set(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))
    seen: list[str] = []

    @pool.job(max_fails=5)
    async def again(ctx: JobContext, word: str) -> str:
        seen.append(word)
        if word == "wait":
            raise Retry(delay=3600)
        return word

    job = await client.enqueue("again", word="wait")
    async with pool.running():
        await wait_until(lambda: _state(client, job.id, "retry"), within=15)
        await console.retry_edited(client, "retry", job.id, ["go"])
        await wait_until(lambda: _state(client, job.id, "complete"), within=15)
    record = await client.job(job.id)
    assert record is not None and (record.args, record.result) == ('["go"]', '"go"')
    assert seen == ["wait", "go"]


def _yearly(redis_url: str, namespace: str, ran: list[tuple[str, str]]) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=2.0))

    @pool.periodic("0 0 1 1 *", name="report", kwargs={"kind": "full"})
    async def report(ctx: JobContext, kind: str) -> None:
        ran.append((ctx.id, kind))

    return pool


async def test_a_periodic_job_runs_now_once_with_its_args_and_its_schedule_unchanged(
    client: Client, redis_url: str, namespace: str
) -> None:
    with pytest.raises(console.NoPeriodicJob, match="no live pool fires a periodic job 'report'"):
        await console.run_periodic(client, "report")
    ran: list[tuple[str, str]] = []
    pool = _yearly(redis_url, namespace, ran)
    async with pool.running():

        async def published() -> bool:
            return any(c.name == "report" for p in await client.admin.pools() for c in p.periodic)

        await wait_until(published, within=10)
        before = [c for p in await client.admin.pools() for c in p.periodic]
        now = time.time()
        first = await console.run_periodic(client, "report", now=now)
        again = await console.run_periodic(client, "report", now=now)
        assert first.created and first.id == f"cron:report:{int(now) * 1000}"
        assert (again.id, again.created) == (first.id, False)
        await wait_until(lambda: len(ran) == 1, within=10)
        await rounds(pool)
        assert ran == [(first.id, "full")]
        after = [c for p in await client.admin.pools() for c in p.periodic]
        assert [c.next_at for c in after] == [c.next_at for c in before]
        assert [c.last_at for c in after] == [c.last_at for c in before]
        # The fire time of a second a pool claimed: that run is the one, none is added.
        fire = int(now) + 7
        shard = client.admin.shards[0]
        await shard.redis.set(shard.keys.cron(f"report:{fire * 1000}"), "some-pool")
        taken = await console.run_periodic(client, "report", now=fire + 0.5)
        assert (taken.id, taken.created) == (f"cron:report:{fire * 1000}", False)
        assert await client.job(taken.id) is None


async def test_a_window_of_a_set_in_either_order(client: Client) -> None:
    base = 2_000_000_000.0  # 2033: far enough ahead to stay scheduled
    ids = [(await client.enqueue_at(base + 60 * i, "later", i=i)).id for i in range(10)]
    page = await console.window(client, "scheduled", since=base + 120, until=base + 360)
    assert (page.total, [j.id for j in page.jobs]) == (5, ids[2:7])
    page = await console.window(
        client, "scheduled", since=base + 120, until=base + 360, order="newest", count=2
    )
    assert (page.total, [j.id for j in page.jobs]) == (5, [ids[6], ids[5]])
    page = await console.window(client, "scheduled", order="newest", offset=8, count=5)
    assert (page.total, [j.id for j in page.jobs]) == (10, [ids[1], ids[0]])
    page = await console.window(client, "scheduled", until=base - 1)
    assert (page.total, page.jobs) == (0, [])
    with pytest.raises(ValueError, match="order: 'newest' or 'oldest'"):
        await console.window(client, "scheduled", order="name")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="since"):
        await console.window(client, "scheduled", since=-1)
    with pytest.raises(ValueError, match="count"):
        await console.window(client, "scheduled", count=1001)


async def test_the_queues_in_each_order(client: Client) -> None:
    assert await console.queue_page(client, "latency") == (0, [])
    await client.enqueue("idle")
    assert await client.admin.clear_queue("idle") == 1  # a name without a queued job
    for name in ("bbb", "bbb", "bbb", "ccc", "aaa"):  # the oldest of "aaa": the newest of all
        await client.enqueue(name)
        await anyio.sleep(0.003)  # a millisecond of its own for each
    for by, expected in [
        ("name", ["aaa", "bbb", "ccc", "idle"]),
        ("size", ["bbb", "aaa", "ccc", "idle"]),
        ("busy", ["bbb", "aaa", "ccc", "idle"]),
        ("latency", ["bbb", "ccc", "aaa", "idle"]),
    ]:
        total, page = await console.queue_page(client, by)  # type: ignore[arg-type]
        assert (total, [q.name for q in page]) == (4, expected), by
    total, page = await console.queue_page(client, "name", offset=1, count=1)
    assert (total, [q.name for q in page]) == (4, ["bbb"])
    with pytest.raises(ValueError, match="count"):
        await console.queue_page(client, "name", count=0)
    with pytest.raises(ValueError, match="order: one of busy"):
        await console.queue_page(client, "age")  # type: ignore[arg-type]
