"""A group is all its members or none of its callback: a producer killed half-way
through a large group's send leaves a group that waits, and the same call again
completes that group, whose callback runs once with every member's result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import anyio
import pytest
import redis.asyncio

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import pool_settings, rounds, wait_until

SIZE = 20_000

# The producer a deploy would run: the same group, with the same job ids, every time.
PRODUCER = textwrap.dedent(
    """
    import sys, anyio
    from rota import Client, JobSpec

    async def main(url, namespace, size):
        client = Client.from_url(url, namespace)
        try:
            members = [JobSpec(name="member", args=(i,), job_id=f"m-{i}") for i in range(size)]
            await client.group(members, then=JobSpec(name="collect"))
        finally:
            await client.close()

    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
    """
)


def _produce(redis_url: str, namespace: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", PRODUCER, redis_url, namespace, str(SIZE)],
        env=env,
        stderr=subprocess.PIPE,
    )


async def _cut_short(client: Client, redis_url: str, namespace: str) -> tuple[str, int]:
    """Start the producer and SIGKILL it once some members are written; the group's id
    and how many of its members got in."""
    proc = _produce(redis_url, namespace)
    gid = None
    try:
        deadline = time.monotonic() + 60
        while gid is None and time.monotonic() < deadline and proc.poll() is None:
            raw = await client.admin.shards[0].redis.hget(
                client.admin.shards[0].keys.job("m-0"), "group"
            )
            gid = raw.decode() if isinstance(raw, bytes) else raw
            await anyio.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
    assert gid is not None, err or "the producer wrote nothing"
    await anyio.sleep(0.2)  # what Redis had read of the pipeline runs
    sent = int(
        await client.admin.shards[0].redis.hget(client.admin.shards[0].keys.group(gid), "sent") or 0
    )
    return gid, sent


@pytest.mark.timeout(180)
@pytest.mark.one_shard("its producer process has one shard")
async def test_a_group_cut_short_waits_and_the_same_call_again_completes_it(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=50))
    runs: dict[int, int] = {}
    collected: list[dict[str, Any]] = []

    @pool.job(keep_result=600)
    async def member(ctx: JobContext, i: int) -> int:
        runs[i] = runs.get(i, 0) + 1
        return i

    @pool.job()
    async def collect(ctx: JobContext) -> None:
        collected.append(dict(ctx.parent_results))

    gid, sent = await _cut_short(client, redis_url, namespace)
    if sent >= SIZE:
        pytest.skip("the producer finished before it could be killed")
    assert 0 < sent < SIZE, sent
    cut = await client.group_progress(gid)
    assert (cut.total, cut.sent, cut.finished) == (SIZE, sent, False)

    # The members written run; the group is not complete, so no callback runs.
    async with pool.running(client=client):
        await wait_until(lambda: len(runs) == sent, within=60)

        async def finished() -> bool:
            return bool((await client.group_progress(gid)).done == sent)

        await wait_until(finished)  # every finish written
        await rounds(pool)  # a callback those finishes queued would be fetched by now
    assert not collected
    assert (await client.group_progress(gid)).done == sent

    # The same call again: the rest join the same group, the callback runs once.
    again = _produce(redis_url, namespace)
    _, err = await anyio.to_thread.run_sync(again.communicate)
    assert again.returncode == 0, err
    async with pool.running(client=client):
        await wait_until(lambda: len(collected) == 1 and len(runs) == SIZE, within=120)
        await rounds(pool)  # a second callback queued by a late finish would be fetched
    assert len(collected) == 1
    assert collected[0] == {f"m-{i}": i for i in range(SIZE)}
    assert set(runs.values()) == {1}  # every member ran once, none twice
    done = await client.group_progress(gid)
    assert (done.total, done.sent, done.done, done.failed) == (SIZE, SIZE, SIZE, 0)
    assert done.then == f"{gid}-then"


@pytest.mark.one_shard("reads one shard's keys")
async def test_the_same_group_twice_writes_it_once(client: Client, namespace: str) -> None:
    specs = [JobSpec(name="member", args=(i,)) for i in range(120)]
    first = await client.group(specs, then=JobSpec(name="collect"), group_id="nightly-1")
    second = await client.group(specs, then=JobSpec(name="collect"), group_id="nightly-1")
    assert first.id == second.id == "nightly-1"
    assert [j.id for j in first.jobs] == [f"nightly-1-{i}" for i in range(120)]
    assert [j.created for j in first.jobs] == [True] * 120
    assert [j.created for j in second.jobs] == [False] * 120
    assert first.then is not None and second.then is not None
    assert (first.then.id, first.then.created, second.then.created) == (
        "nightly-1-then",
        True,
        False,
    )
    progress = await client.group_progress("nightly-1")
    assert (progress.total, progress.sent) == (120, 120)
    assert (
        await client.admin.shards[0].redis.llen(
            client.admin.shards[0].keys.group_members("nightly-1")
        )
        == 120
    )


async def test_member_ids_make_the_group_id(client: Client) -> None:
    specs = [JobSpec(name="member", job_id=f"x-{i}") for i in range(3)]
    assert (await client.group(specs)).id == (await client.group(specs)).id
    other = [JobSpec(name="member", job_id=f"y-{i}") for i in range(3)]
    assert (await client.group(other)).id != (await client.group(specs)).id
    unnamed = [JobSpec(name="member") for _ in range(3)]
    assert (await client.group(unnamed)).id != (await client.group(unnamed)).id


@pytest.mark.one_shard("its producer process has one shard")
async def test_a_group_that_does_not_match_what_redis_holds_is_refused_whole(
    client: Client, namespace: str
) -> None:
    await client.group([JobSpec(name="member") for _ in range(3)], group_id="g1")
    await client.enqueue("member", job_id="loner")
    cases = {
        "was made with 3 members, not 4": ([JobSpec(name="member") for _ in range(4)], None),
        "exists outside group g1": (
            [*(JobSpec(name="member") for _ in range(2)), JobSpec(name="member", job_id="loner")],
            None,
        ),
        "has callback g1-then already, not other": (
            [JobSpec(name="member") for _ in range(3)],
            JobSpec(name="collect", job_id="other"),
        ),
    }
    three = [JobSpec(name="member") for _ in range(3)]
    await client.group(three, JobSpec(name="collect"), group_id="g1")
    before = await client.admin.shards[0].redis.dbsize()
    for text, (specs, then) in cases.items():
        with pytest.raises(ValueError, match=text):
            await client.group(specs, then, group_id="g1")
    assert (
        await client.admin.shards[0].redis.dbsize() == before
    )  # nothing of a refused call is written
    with pytest.raises(ValueError, match="given twice"):
        await client.group([JobSpec(name="member", job_id="a"), JobSpec(name="member", job_id="a")])
    with pytest.raises(ValueError, match="invalid group id"):
        await client.group([JobSpec(name="member")], group_id="no spaces")


async def test_a_member_without_a_size_is_refused_by_the_script(
    client: Client, redis_url: str
) -> None:
    """Another language's producer that leaves out the size gets an error, not a group
    that completes after its first member."""
    row = client._row(JobSpec(name="member"), group="bare", group_size=0)
    with pytest.raises(ValueError, match="has no size"):
        await client.admin.shards[0].send([row])
    plain: redis.asyncio.Redis = client.admin.shards[0].redis
    assert not await plain.exists(client.admin.shards[0].keys.group("bare"))


async def test_a_member_given_twice_in_one_call_is_refused_by_the_script(
    client: Client,
) -> None:
    """A producer in another language that sends one id twice gets an error, not a group
    that waits for a second member that never comes."""
    rows = [
        client._row(JobSpec(name="member", job_id="twice"), group="g2", group_size=2)
        for _ in range(2)
    ]
    with pytest.raises(ValueError, match="job twice is given twice"):
        await client.admin.shards[0].send(rows)
    assert not await client.admin.shards[0].redis.exists(
        client.admin.shards[0].keys.group("g2"), client.admin.shards[0].keys.job("twice")
    )
