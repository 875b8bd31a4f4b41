"""Pause and resume, unique jobs, results, and the client's admin queries and actions."""

from __future__ import annotations

from typing import cast

import anyio
import pytest
import redis

import rota
from rota import Client, JobContext, JobSpec, State, WorkerPool
from tests.helpers import pool_settings, rounds, wait_until


async def test_paused_names_are_not_fetched_until_resumed(
    client: Client, redis_url: str, namespace: str
) -> None:
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def held(ctx: JobContext) -> None:
        ran.append(ctx.name)

    @pool.job
    async def flowing(ctx: JobContext) -> None:
        ran.append(ctx.name)

    await client.admin.pause("held")
    for _ in range(5):
        await client.enqueue("held")
        await client.enqueue("flowing")
    async with pool.running():
        await wait_until(lambda: ran.count("flowing") == 5)
        await rounds(pool)  # a fetch that began after every held job was queued
        assert "held" not in ran
        (q,) = await client.admin.queues(["held"])
        assert (q.size, q.paused) == (5, True)
        await client.admin.resume("held")
        await wait_until(lambda: ran.count("held") == 5, within=2)
    (q,) = await client.admin.queues(["held"])
    assert (q.size, q.paused) == (0, False)


@pytest.mark.one_shard
async def test_unique_key_returns_the_holder_until_it_finishes(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    first = await client.enqueue("report", unique="report:42", n=1)
    second = await client.enqueue("report", unique="report:42", n=2)
    other = await client.enqueue("report", unique="report:43", n=3)
    assert first.created and not second.created and other.created
    assert second.id == first.id
    (q,) = await client.admin.queues(["report"])
    assert q.size == 2
    ukey = "{" + namespace + "}:unique:report:42"
    assert redis_sync.get(ukey) == first.id.encode()
    assert 0 < redis_sync.pttl(ukey) <= 86_400_000

    pool = WorkerPool(settings=pool_settings(redis_url, namespace))
    done: list[int] = []

    @pool.job(max_fails=1)
    async def report(ctx: JobContext, n: int) -> None:
        done.append(n)
        if n == 3:
            raise RuntimeError("dies")

    async with pool.running():
        await wait_until(lambda: sorted(done) == [1, 3])
        await wait_until(lambda: redis_sync.exists(ukey, ukey[:-1] + "3") == 0)
    # completed and dead jobs both release their key
    again = await client.enqueue("report", unique="report:42", n=4)
    assert again.created and again.id != first.id


async def test_unique_key_with_a_short_ttl_expires(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    await client.enqueue("report", unique="k", unique_ttl=0.05)
    await anyio.sleep(0.1)
    assert (await client.enqueue("report", unique="k")).created


async def test_job_id_makes_enqueue_idempotent(client: Client) -> None:
    a = await client.enqueue("x", job_id="order-7")
    b = await client.enqueue("x", job_id="order-7")
    assert (a.id, a.created, b.id, b.created) == ("order-7", True, "order-7", False)
    (q,) = await client.admin.queues(["x"])
    assert q.size == 1


async def test_results_are_kept_readable_and_expire(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(keep_result=0.5)
    async def compute(ctx: JobContext, x: int) -> dict[str, int]:
        return {"square": x * x}

    @pool.job(keep_result=0)
    async def forget(ctx: JobContext) -> str:
        return "gone"

    job = await client.enqueue("compute", x=12)
    gone = await client.enqueue("forget")
    async with pool.running():
        await wait_until(lambda: _state(client, job.id, State.COMPLETE))
        await wait_until(lambda: _missing(client, gone.id))
    record = await client.job(job.id)
    assert record is not None
    assert record.result_value == {"square": 144}
    assert record.finished_at is not None and record.started_at is not None
    await wait_until(lambda: _missing(client, job.id), within=3)


async def _state(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def _missing(client: Client, job_id: str) -> bool:
    return await client.job(job_id) is None


async def test_queue_figures(client: Client) -> None:
    await client.enqueue("a")
    await anyio.sleep(0.2)
    await client.enqueue("a")
    await client.admin.set_limit("a", 4)
    await client.admin.pause("b")
    (a, b) = await client.admin.queues(["a", "b"])
    assert (a.name, a.size, a.running, a.limit, a.paused) == ("a", 2, 0, 4, False)
    assert 0.2 <= a.latency < 5
    assert (b.size, b.latency, b.paused, b.limit) == (0, 0.0, True, None)
    assert await client.admin.names() == ["a"]


async def test_dead_jobs_page_retry_and_delete(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))
    fail = True
    ran: list[str] = []

    @pool.job(max_fails=1)
    async def fragile(ctx: JobContext, i: int) -> None:
        ran.append(ctx.id)
        if fail:
            raise RuntimeError(f"fail {i}")

    jobs = [await client.enqueue("fragile", i=i) for i in range(7)]
    async with pool.running():
        await wait_until(lambda: _dead_total(client, 7))
        page = await client.admin.page("dead", offset=0, count=5)
        assert (page.total, len(page.jobs)) == (7, 5)
        rest = await client.admin.page("dead", offset=5, count=5)
        assert len(rest.jobs) == 2
        assert {j.id for j in page.jobs + rest.jobs} == {j.id for j in jobs}
        assert all(j.reason == "error" for j in page.jobs)

        fail = False
        assert await client.admin.retry("dead", [jobs[0].id, "no-such-id"]) == 1
        await wait_until(lambda: ran.count(jobs[0].id) == 2)
        assert await client.admin.delete("dead", [jobs[1].id]) == 1
        assert await client.job(jobs[1].id) is None
        assert await client.admin.retry("dead") == 5
        await wait_until(lambda: len(ran) == 7 + 1 + 5)
        await wait_until(lambda: _dead_total(client, 0))

    with pytest.raises(ValueError, match="unknown job set"):
        await client.admin.page("nowhere")  # type: ignore[arg-type]


async def _dead_total(client: Client, n: int) -> bool:
    return (await client.admin.page("dead")).total == n


async def test_delete_all_dead_and_clear_queue(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    p = "{" + namespace + "}:"
    for i in range(3):
        redis_sync.hset(p + f"job:d{i}", mapping={"name": "n", "args": "{}", "state": "dead"})
        redis_sync.zadd(p + "dead", {f"d{i}": i})
    assert await client.admin.delete("dead") == 3
    assert redis_sync.exists(p + "job:d0", p + "dead") == 0
    await client.enqueue_many([JobSpec(name="q", kwargs={"i": i}) for i in range(1200)])
    assert await client.admin.clear_queue("q") == 1200
    (q,) = await client.admin.queues(["q"])
    assert q.size == 0


async def test_enqueue_rejects_bad_input(client: Client) -> None:
    with pytest.raises(ValueError, match="invalid job name"):
        await client.enqueue("has space")
    with pytest.raises(
        rota.PayloadTooLarge, match=r"args of job 'big' are \d+ bytes encoded, over the limit"
    ):
        await client.enqueue("big", blob="x" * (600 * 1024))
    with pytest.raises(TypeError, match="argument 0: a value of type object cannot travel in JSON"):
        await client.enqueue("x", object())
    with pytest.raises(TypeError, match="not both"):
        await client.enqueue("x", 1, a=2)
    assert await client.admin.names() == []


async def test_enqueue_many_applies_each_jobs_options(client: Client) -> None:
    specs = [
        JobSpec(name="a", kwargs={"i": 1}, unique="same"),
        JobSpec(name="a", kwargs={"i": 2}, unique="same"),
        JobSpec(name="b", args=(1, 2), delay=60),
        JobSpec(name="c", job_id="fixed-id", max_fails=2, timeout=1.5),
        JobSpec(name="c", job_id="fixed-id"),
    ]
    jobs = await client.enqueue_many(specs)
    assert [j.created for j in jobs] == [True, False, True, True, False]
    assert jobs[1].id == jobs[0].id
    assert (jobs[3].id, jobs[4].id) == ("fixed-id", "fixed-id")
    assert await client.admin.names() == ["a", "b", "c"]
    assert (await client.admin.page("scheduled")).jobs[0].id == jobs[2].id
    record = await client.job("fixed-id")
    assert record is not None
    assert (record.max_fails, record.timeout, record.state) == (2, 1.5, "queued")
    sizes = {q.name: q.size for q in await client.admin.queues()}
    assert sizes == {"a": 1, "b": 0, "c": 1}


@pytest.mark.one_shard
async def test_enqueue_many_queues_each_name_in_the_order_given(
    client: Client, redis_sync: redis.Redis
) -> None:
    # One batch pushes each name's ids in one LPUSH: the first given is at the tail (runs
    # first), and a queue that held jobs keeps them ahead.
    first = await client.enqueue("a")
    jobs = await client.enqueue_many([JobSpec(name=n) for n in "abab" + "a" * 60])
    for name in ("a", "b"):
        given = [first.id] * (name == "a") + [j.id for j in jobs if j.name == name]
        queue = [
            e.decode()
            for e in cast(
                list[bytes], redis_sync.lrange(client.admin.shards[0].keys.queue(name), 0, -1)
            )
        ]
        assert queue[::-1] == given
    assert cast(set[bytes], redis_sync.smembers(client.admin.shards[0].keys.ready)) == {b"a", b"b"}
    assert (
        redis_sync.llen(client.admin.shards[0].keys.wake("b")) == 1
    )  # one token per name and batch


@pytest.mark.one_shard
async def test_enqueue_many_refuses_a_queue_key_that_is_not_a_list(
    client: Client, redis_sync: redis.Redis
) -> None:
    # Checked before anything is written: no record is left outside every queue.
    redis_sync.set(client.admin.shards[0].keys.queue("broken"), "x")
    with pytest.raises(rota.RedisRefused, match="queue broken is a string"):
        await client.enqueue_many([JobSpec(name="broken", job_id=f"b{i}") for i in range(3)])
    assert [redis_sync.exists(client.admin.shards[0].keys.job(f"b{i}")) for i in range(3)] == [
        0,
        0,
        0,
    ]
