"""A running pool stops serving the shards a change of the shard count retired (see
rota.worker.retire): after 1 -> 3 -> 1 and 2 -> 4 it serves exactly the new set, its
rebalancer covers that set, the retired tags hold nothing but their record after its
next heartbeats, and a job still running in a retired shard when the change ends
finishes there (the rebalancer covering that shard until then), its outcome moved to
its new home (once, nothing lost)."""

from __future__ import annotations

import itertools
import sys
from collections import Counter

import anyio
import pytest
import redis
from structlog.testing import capture_logs

from rota import Client, JobContext, WorkerPool
from rota.client.resize import live_pools, pools_serving, resize, settle_retired
from rota.protocol.reshard import RESHARD_MESSAGE, ShardRecord
from rota.protocol.shards import shard_of, shard_tags
from rota.worker.run import PoolRun
from tests.helpers import pool_settings, wait_until


def _say(line: str) -> None:
    sys.stdout.write(f"resize: {line}\n")


def _served(run: PoolRun) -> list[str]:
    return [r.keys.prefix[1:-2] for r in run.serving]


def _rebalanced(run: PoolRun) -> list[str]:
    return [r.keys.prefix[1:-2] for r in run.rebalancer.served()]


def _keys_of(redis_sync: redis.Redis, tag: str) -> set[str]:
    """Every key under ``tag`` but its record (a SCAN: a test may)."""
    found = {k.decode() for k in redis_sync.scan_iter(match=f"{{{tag}}}:*", count=1000)}
    return found - {f"{{{tag}}}:shards"}


@pytest.mark.parametrize(("start", "steps"), [(1, [3, 1]), (2, [4])])
async def test_a_running_pool_ends_serving_exactly_the_new_set(
    redis_url: str, namespace: str, redis_sync: redis.Redis, start: int, steps: list[int]
) -> None:
    pairs = list(itertools.pairwise([start, *steps]))
    while not any(set(shard_tags(namespace, a)) - set(shard_tags(namespace, b)) for a, b in pairs):
        namespace += "x"  # a namespace whose steps retire a shard (2 -> 4 may not)
    if start > 1:
        async with Client.from_url(redis_url, namespace) as op:
            await resize(op, start, say=_say)
    settings = pool_settings(
        redis_url, namespace, shards=start, concurrency=4, heartbeat_interval=0.1
    )
    pool = WorkerPool(settings=settings)
    ran = Counter[str]()

    @pool.job(name="work")
    async def work(ctx: JobContext, i: int) -> None:
        ran[ctx.id] += 1

    retired_seen: set[str] = set()
    with capture_logs() as logs:
        async with Client.from_url(redis_url, namespace) as op, pool.running():
            run = pool.current_run
            assert run is not None
            count = start
            for to in steps:
                old = set(shard_tags(namespace, count))
                done = await resize(op, to, timeout=60, say=_say)
                new = list(shard_tags(namespace, to))
                retired = old - set(new)
                retired_seen |= retired
                assert done.done and not done.lingering
                await wait_until(lambda: _served(run) == new, within=20)  # noqa: B023
                await wait_until(lambda: _rebalanced(run) == new, within=20)  # noqa: B023
                # The pool's next heartbeats write nothing into the retired tags.
                beats = run.heartbeats[0].beats
                await wait_until(lambda: run.heartbeats[0].beats >= beats + 3, within=20)  # noqa: B023
                for tag in retired:
                    assert _keys_of(redis_sync, tag) == set(), tag
                jobs = [(await op.enqueue("work", i=i)).id for i in range(20)]
                await wait_until(lambda: set(ran) >= set(jobs), within=20)  # noqa: B023
                count = to
    assert retired_seen
    lines = [e for e in logs if e["event"] == "shard retired"]
    assert sorted(e["tag"][1:-1] for e in lines) == sorted(retired_seen)  # one line each
    assert max(ran.values()) == 1


async def test_a_job_running_in_a_retired_shard_finishes_and_its_outcome_moves(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """1 -> 3, a job of a shard only 3 has is running when 3 -> 1 ends (the record
    written while it runs, as when it was leased after the command's last look): the
    pool keeps that shard's heartbeat until the job ends, acks it there, then leaves;
    the command's last step then moves the outcome to the job's home under 1."""
    settings = pool_settings(
        redis_url, namespace, concurrency=2, heartbeat_interval=0.1, keep_result=600
    )
    pool = WorkerPool(settings=settings)
    started, release = anyio.Event(), anyio.Event()
    ran = Counter[str]()

    @pool.job(name="slow")
    async def slow(ctx: JobContext) -> str:
        ran[ctx.id] += 1
        started.set()
        await release.wait()
        return "done"

    n = 0
    while shard_of(f"j{n}", 3) == 0:  # an id of a shard that 1 does not have
        n += 1
    job_id = f"j{n}"
    tag = shard_tags(namespace, 3)[shard_of(job_id, 3)]
    async with Client.from_url(redis_url, namespace) as op, pool.running():
        run = pool.current_run
        assert run is not None
        await resize(op, 3, timeout=60, say=_say)
        await op.enqueue("slow", job_id=job_id)
        await started.wait()
        cut = await resize(op, 1, wait=False, say=_say)  # 3>1@3: the job holds it up
        assert not cut.done
        union = list(op.admin.shards)
        retired = [s for s in union if s.keys.prefix[1:-2] != namespace]
        final = ShardRecord(3, 1, 3).ended()
        for shard in (*union[1:], union[0]):
            await shard.redis.set(shard.keys.shards, final.text())
        await union[0].redis.publish(union[0].keys.pool_commands_told, RESHARD_MESSAGE)
        await wait_until(lambda: _served(run) == [namespace], within=20)
        # The job still runs there: the pool's heartbeat stays in its shard, and the
        # rebalancer covers it (the job counts against its name's limit), the other
        # retired shard not.
        await wait_until(lambda: _rebalanced(run) == [namespace, tag], within=20)
        home = next(s for s in retired if s.keys.prefix[1:-2] == tag)
        # The pool is named there: by its score in the shard when the shard was added
        # during the run, by its snapshot in shard 0 (at its next beat) when it was one
        # of the shards the pool started with on one server, where it is scored in
        # shard 0 alone (rota.worker.idle).

        async def named_there() -> bool:
            snapshot = (await pools_serving(union[0], [tag])).get(tag, [])
            return run.rt.pool_id in [*snapshot, *await live_pools(home, union[0])]

        await wait_until(named_there, within=20)
        named = op.admin.follower.route.named

        async def only_there() -> bool:
            """Without waiting: the pool is named where it still beats (once it left the
            other retired shard), and nothing moves."""
            said = await settle_retired(retired, named, union[0], wait=False, say=_say)
            return said == ({tag: [run.rt.pool_id]}, {}, 0)

        await wait_until(only_there, within=20)
        release.set()
        lingering, live, moved = await settle_retired(
            retired, named, union[0], timeout=30, say=_say
        )
        assert (lingering, live) == ({}, {})
        assert moved >= 1
        await wait_until(lambda: _rebalanced(run) == [namespace], within=20)
        for shard in retired:
            assert _keys_of(redis_sync, shard.keys.prefix[1:-2]) == set()
        job = await op.job(job_id)
        assert job is not None and job.state == "complete"
        assert job.result == '"done"'
    assert ran[job_id] == 1


async def test_a_hand_written_member_of_the_retired_note_settles_no_foreign_keys(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """Settling a retired shard deletes its keys: a tag written by hand into the note
    (another namespace's, or none of this one's form) is said and left, never settled."""
    async with Client.from_url(redis_url, namespace) as op:
        note = op.admin.shards[0].keys.retired
        foreign = ["other~1", namespace, f"{namespace}~x", f"{namespace}~1."]
        redis_sync.sadd(note, *foreign)
        for tag in foreign:
            redis_sync.set(f"{{{tag}}}:queue:kept", "1")
        said: list[str] = []
        done = await resize(op, 1, say=said.append)
    assert done.done
    assert all(redis_sync.exists(f"{{{tag}}}:queue:kept") for tag in foreign)
    assert sum("ignored" in line for line in said) == len(foreign), said
    assert not redis_sync.exists(note)  # nothing left to settle: the note is gone
