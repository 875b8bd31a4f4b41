"""Workflows on a real Redis: dependencies, results that flow, chains and groups."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from rota import Client, JobContext, JobNotFound, JobSpec, Retry, WorkerPool
from tests.helpers import pool_settings, wait_until


def flow_pool(redis_url: str, namespace: str, **changes: Any) -> tuple[WorkerPool, dict[str, Any]]:
    """A pool whose handlers note when each job ran and what it saw of its parents."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600, **changes))
    seen: dict[str, Any] = {"order": [], "parents": {}, "fail": set(), "flaky": {}}

    @pool.job(max_fails=1)
    async def step(ctx: JobContext, label: str) -> str:
        seen["order"].append(label)
        seen["parents"][label] = dict(ctx.parent_results)
        if label in seen["fail"]:
            raise RuntimeError(f"{label} fails")
        return label.upper()

    @pool.job(max_fails=3, backoff=lambda n: 0.05)
    async def flaky(ctx: JobContext, label: str) -> str:
        seen["order"].append(label)
        if seen["flaky"].get(label, 0) > 0:
            seen["flaky"][label] -= 1
            raise Retry(delay=0.05)
        return label.upper()

    return pool, seen


def step(label: str, **options: Any) -> JobSpec:
    return JobSpec(name="step", kwargs={"label": label}, **options)


async def states(client: Client, *ids: str) -> list[str]:
    out = []
    for job_id in ids:
        record = await client.job(job_id)
        out.append(record.state if record else "missing")
    return out


async def test_a_diamond_runs_in_order_and_the_last_sees_both_results(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    c = await client.enqueue("step", label="c", after=[a.id])
    d = await client.enqueue("step", label="d", after=[b.id, c.id])
    assert await states(client, b.id, c.id, d.id) == ["waiting"] * 3
    assert (await client.admin.job_set_sizes())["waiting"] == 3
    assert {j.id for j in (await client.admin.page("waiting")).jobs} == {b.id, c.id, d.id}
    async with pool.running(client=client):
        await wait_until(lambda: len(seen["order"]) == 4)
        await wait_until(lambda: _all(client, [a.id, b.id, c.id, d.id], "complete"))
    assert (await client.admin.job_set_sizes())["waiting"] == 0
    order = seen["order"]
    assert order[0] == "a" and order[-1] == "d" and sorted(order[1:3]) == ["b", "c"]
    assert seen["parents"]["d"] == {b.id: "B", c.id: "C"}
    assert list(seen["parents"]["d"]) == [b.id, c.id]  # in the order of after=
    assert seen["parents"]["b"] == {a.id: "A"}
    assert seen["parents"]["a"] == {}
    assert await client.admin.children(a.id) == sorted([b.id, c.id])
    record = await client.job(d.id)
    assert record is not None and set(record.after) == {b.id, c.id}


async def _all(client: Client, ids: list[str], state: str) -> bool:
    return await states(client, *ids) == [state] * len(ids)


@pytest.mark.one_shard
async def test_a_dead_parent_fails_exactly_its_descendants(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    seen["fail"].add("a")
    a = await client.enqueue("step", label="a")
    other = await client.enqueue("step", label="other")
    b = await client.enqueue("step", label="b", after=[a.id])
    c = await client.enqueue("step", label="c", after=[b.id])
    both = await client.enqueue("step", label="both", after=[other.id, a.id])
    free = await client.enqueue("step", label="free", after=[other.id])
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [a.id, b.id, c.id, both.id], "dead"))
        await wait_until(lambda: _all(client, [other.id, free.id], "complete"))
    assert sorted(seen["order"]) == ["a", "free", "other"]
    for job_id, parent in [(b.id, a.id), (c.id, b.id), (both.id, a.id)]:
        record = await client.job(job_id)
        assert record is not None and record.reason == "dependency_failed"
        assert record.error is not None and f"parent {parent} ended dead" in record.error
    dead = await client.admin.page("dead")
    assert {j.id for j in dead.jobs} == {a.id, b.id, c.id, both.id}


async def test_a_child_enqueued_after_a_dead_parent_is_counted_dead(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, _ = flow_pool(redis_url, namespace)
    _["fail"].add("a")
    a = await client.enqueue("step", label="a")
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [a.id], "dead"))
    before = await client.admin.stats()
    late = await client.enqueue("step", label="late", after=[a.id])
    batch = await client.enqueue_many([step("late2", after=(a.id,))])
    assert await _all(client, [late.id, batch[0].id], "dead")
    after = await client.admin.stats()
    assert after.get("dead", 0) - before.get("dead", 0) == 2
    assert after.get("failed", 0) - before.get("failed", 0) == 2
    assert after.get("dead:step", 0) - before.get("dead:step", 0) == 2


async def test_a_chain_of_100_runs_in_order(client: Client, redis_url: str, namespace: str) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    jobs = await client.chain([step(f"s{i}") for i in range(100)])
    assert len(jobs) == 100 and all(j.created for j in jobs)
    async with pool.running(client=client):
        await wait_until(lambda: len(seen["order"]) == 100, within=30)
    assert seen["order"] == [f"s{i}" for i in range(100)]
    assert seen["parents"]["s99"] == {jobs[98].id: "S98"}


@pytest.mark.one_shard
async def test_a_group_calls_back_once_with_every_result(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace, concurrency=50)
    g = await client.group([step(f"m{i}") for i in range(1000)], then=step("callback"))
    assert g.then is not None and len(g.jobs) == 1000
    progress = await client.group_progress(g.id)
    assert (progress.total, progress.done, progress.failed) == (1000, 0, 0)
    # a member waits for nothing: its handler reads no parent results
    assert not await client.admin.shards[0].redis.hexists(
        client.admin.shards[0].keys.job(g.jobs[0].id), "deps"
    )
    assert await client.admin.shards[0].redis.hexists(
        client.admin.shards[0].keys.job(g.then.id), "deps"
    )
    assert await states(client, g.then.id) == ["waiting"]
    then_id = g.then.id
    async with pool.running(client=client):
        await wait_until(lambda: "callback" in seen["order"], within=30)
        await wait_until(lambda: _all(client, [then_id], "complete"))
    assert seen["order"].count("callback") == 1
    assert seen["order"][-1] == "callback"
    results = seen["parents"]["callback"]
    assert results == {j.id: f"M{i}" for i, j in enumerate(g.jobs)}
    assert list(results) == [j.id for j in g.jobs]  # in the order of the members
    progress = await client.group_progress(g.id)
    assert (progress.total, progress.done, progress.failed, progress.then) == (
        1000,
        1000,
        0,
        g.then.id,
    )
    assert progress.finished
    assert await client.admin.group_members(g.id, 0, 3) == [j.id for j in g.jobs[:3]]


async def test_a_failed_member_makes_the_callback_dead(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    seen["fail"].add("m2")
    g = await client.group([step(f"m{i}") for i in range(5)], then=step("callback"))
    assert g.then is not None
    then_id = g.then.id
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [then_id], "dead"))
        await wait_until(lambda: len(seen["order"]) == 5)
    assert "callback" not in seen["order"]
    progress = await client.group_progress(g.id)
    assert (progress.done, progress.failed) == (4, 1)
    record = await client.job(g.then.id)
    assert record is not None and record.reason == "dependency_failed"


async def test_a_missing_parent_is_an_error_and_writes_nothing(
    client: Client, redis_sync: Any, namespace: str
) -> None:
    with pytest.raises(JobNotFound, match="parent nope of job"):
        await client.enqueue("step", label="x", after=["nope"], job_id="child-1")
    with pytest.raises(JobNotFound, match="parent nope"):
        await client.enqueue_many([step("y", job_id="ok-1"), step("z", after=("nope",))])
    assert redis_sync.keys("{" + namespace + "}:*") == []


async def test_a_parent_complete_already_counts_as_done(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    a = await client.enqueue("step", label="a")
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [a.id], "complete"))
        b = await client.enqueue("step", label="b", after=[a.id])
        await wait_until(lambda: _all(client, [b.id], "complete"))
    assert seen["parents"]["b"] == {a.id: "A"}


async def test_a_retried_parent_keeps_its_child_waiting(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    seen["flaky"]["p"] = 2
    p = await client.enqueue("flaky", label="p")
    kid = await client.enqueue("step", label="kid", after=[p.id])
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [kid.id], "complete"))
    assert seen["order"] == ["p", "p", "p", "kid"]


async def test_retrying_a_dead_parent_rearms_its_children(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = flow_pool(redis_url, namespace)
    seen["fail"].add("a")
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    c = await client.enqueue("step", label="c", after=[b.id])
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [a.id, b.id, c.id], "dead"))
        seen["fail"].clear()
        assert await client.admin.retry("dead", [a.id]) == 3  # a, and b and c wait again
        await wait_until(lambda: _all(client, [a.id, b.id, c.id], "complete"))
    assert seen["order"] == ["a", "a", "b", "c"]


async def test_a_child_scheduled_for_later_waits_for_both(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, _ = flow_pool(redis_url, namespace)
    a = await client.enqueue("step", label="a")
    later = await client.enqueue_in(0.6, "step", label="later", after=[a.id])
    start = time.monotonic()
    async with pool.running(client=client):
        await wait_until(lambda: _all(client, [a.id], "complete"))
        assert await states(client, later.id) == ["scheduled"]
        await wait_until(lambda: _all(client, [later.id], "complete"))
    assert time.monotonic() - start >= 0.5


async def test_aborting_a_waiting_parent_fails_its_child(client: Client, namespace: str) -> None:
    a = await client.enqueue("step", label="a", after=[(await client.enqueue("x")).id])
    b = await client.enqueue("step", label="b", after=[a.id])
    assert await client.abort(a.id) == "waiting"
    assert await states(client, a.id, b.id) == ["aborted", "dead"]
    assert (await client.admin.job_set_sizes())["waiting"] == 0
    await anyio.lowlevel.checkpoint()
