"""Changing the shard count of a namespace in use (``rota shards resize``; see
rota.client.resize): with a pool and a producer running no job is lost or run twice,
what exists from before (a unique or debounce key's holder, a group, a chain, a dead
job) is found and finishes, a producer built before the change is refused by the
enqueue script and succeeds after reading the record again, and a record written by
hand is one line naming its key."""

from __future__ import annotations

import itertools
import sys
import time
from collections import Counter

import anyio
import pytest
import redis
from structlog.testing import capture_logs

from rota import Client, Debounce, JobContext, JobSpec, WorkerPool
from rota.client.resize import live_jobs, resize
from rota.client.spec import to_row
from rota.protocol import calls
from rota.protocol.keys import Keys
from rota.protocol.reshard import BadRecord, ShardRecord
from rota.protocol.shards import shard_of, shard_tags
from rota.wire.redispy import ReplyError
from tests.cli_helpers import run_rota
from tests.helpers import pool_settings, wait_until


def _say(line: str) -> None:
    sys.stdout.write(f"resize: {line}\n")


async def change_under_load(redis_url: str, namespace: str, steps: list[int], start: int) -> None:
    """A pool and a producer run while the count goes through ``steps``: every job
    enqueued runs, once."""
    if start > 1:
        async with Client.from_url(redis_url, namespace) as op:
            await resize(op, start, say=_say)
    starts: list[tuple[float, str]] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=start, concurrency=8))

    @pool.job(name="work")
    async def work(ctx: JobContext, i: int) -> None:
        starts.append((time.monotonic(), ctx.id))
        await anyio.sleep(0.2 if i % 20 == 0 else 0.002)  # some still run as it starts

    producer = Client.from_url(redis_url, namespace, shards=start)  # built before
    operator = Client.from_url(redis_url, namespace)
    sent: list[str] = []
    stop, stopped = anyio.Event(), anyio.Event()

    async def produce() -> None:
        i = 0
        while not stop.is_set():
            sent.append((await producer.enqueue("work", i=i)).id)
            i += 1
            await anyio.sleep(0.003)
        stopped.set()  # the last enqueue in flight at the stop is in `sent` too

    try:
        async with pool.running(), anyio.create_task_group() as tg:
            tg.start_soon(produce)
            await wait_until(lambda: len(starts) > 50, within=20)
            for frm, to in itertools.pairwise([start, *steps]):
                began = time.monotonic()
                done = await resize(operator, to, timeout=60, say=_say)
                generation = operator.admin.follower.route.record.generation
                assert done.done and done.record == f"{to}@{generation}"
                during = [t for t, _ in starts if t >= began]
                gaps = [b - a for a, b in itertools.pairwise(during)]
                sys.stdout.write(
                    f"{frm} -> {to}: {len(during)} starts during the change,"
                    f" longest pause between starts {max(gaps, default=0) * 1000:.0f} ms\n"
                )
                await wait_until(lambda: len(starts) > len(sent) - 5, within=20)
            stop.set()
            await stopped.wait()
            await wait_until(lambda: {i for _, i in starts} >= set(sent), within=30)
            tg.cancel_scope.cancel()
    finally:
        await producer.close()
        await operator.close()
    runs = Counter(i for _, i in starts)
    duplicates = sum(n - 1 for n in runs.values())
    sys.stdout.write(f"{len(sent)} jobs sent, {len(runs)} ran, duplicates {duplicates}\n")
    assert set(sent) <= set(runs)  # none lost
    assert duplicates == 0
    assert producer.admin.follower.route.routing == steps[-1]  # the stale producer followed


@pytest.mark.slow
async def test_one_to_three_to_one_with_a_pool_and_a_producer_running(
    redis_url: str, namespace: str
) -> None:
    await change_under_load(redis_url, namespace, [3, 1], start=1)


@pytest.mark.slow
async def test_two_to_four_with_a_pool_and_a_producer_running(
    redis_url: str, namespace: str
) -> None:
    await change_under_load(redis_url, namespace, [4], start=2)


def _key_in(shards: int, shard: int, prefix: str) -> str:
    """A key (unique, debounce, group id) whose route names ``shard`` of ``shards``."""
    n = 0
    while shard_of(f"{prefix}{n}", shards) != shard:
        n += 1
    return f"{prefix}{n}"


async def test_what_exists_in_the_old_home_is_found_during_and_after_a_change(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """2 -> 4 with no pool running: a unique key held in its old home refuses a
    duplicate, a debounce key there is extended, a dead job is found by id and retried
    after; the change waits for the old shard's live jobs and resumes when run again."""
    while shard_tags(namespace, 2)[1] in shard_tags(namespace, 4):  # one tag in both
        namespace += "x"
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 2, say=_say)
    old = shard_tags(namespace, 2)[1]
    before = Client.from_url(redis_url, namespace, shards=2)
    ukey, dkey = _key_in(2, 1, "u"), _key_in(2, 1, "d")
    held = await before.enqueue_in(3600, "later", unique=ukey)
    window = Debounce(dkey, 60, mode="extend")
    debounced = await before.enqueue("later", debounce=window)
    dead_id = (await before.enqueue("later", job_id=_key_in(2, 1, "dead-"))).id
    before_due = (await before.job(debounced.id)).run_at  # type: ignore[union-attr]
    shard1 = before.admin.shards[1]
    # Made dead by hand, as a failed job is: out of its queue, into the dead set.
    await shard1.redis.lrem(shard1.keys.queue("later"), 0, dead_id)
    await shard1.redis.hset(shard1.keys.job(dead_id), mapping={"state": "dead", "reason": "x"})
    await shard1.redis.zadd(shard1.keys.dead, {dead_id: time.time() * 1000})
    async with Client.from_url(redis_url, namespace) as op:
        started = await resize(op, 4, wait=False, say=_say)
        assert not started.done and started.live == {old: 2}
        # A client built before, and one built during the change, alike.
        for client in (before, op):
            again = await client.enqueue_in(3600, "later", unique=ukey)
            assert again.id == held.id and not again.created
        await anyio.sleep(0.01)
        extended = await op.enqueue("later", debounce=window)
        assert extended.id == debounced.id and not extended.created
        after_due = (await op.job(debounced.id)).run_at  # type: ignore[union-attr]
        assert after_due is not None and before_due is not None and after_due > before_due
        record = await op.job(dead_id)
        assert record is not None and record.state == "dead"
        # An id from before, enqueued again, enqueues nothing (it exists in its old home).
        assert not (await op.enqueue("later", job_id=dead_id)).created
        # Interrupted (it returned, or was cut short): run again, it resumes.
        with anyio.move_on_after(0.3):
            await resize(op, 4, say=_say)
        assert await op.admin.delete("scheduled") == 2
        done = await resize(op, 4, say=_say)
        assert done.done and done.moved >= 1
        assert not redis_sync.exists(Keys.of_tag(namespace, old, 1).job(dead_id))
        found = await op.job(dead_id)
        assert found is not None and found.state == "dead"
        assert await op.admin.retry("dead", [dead_id]) == 1
        assert (await op.job(dead_id)).state == "queued"  # type: ignore[union-attr]
        # The retired shard keeps the record, so that a producer routing there is refused.
        assert redis_sync.get(Keys.of_tag(namespace, old, 1).shards) == done.record.encode()
    await before.close()


async def test_a_group_and_a_chain_from_before_finish_after_the_change(
    redis_url: str, namespace: str
) -> None:
    """2 -> 1: a group and a chain enqueued in the shard being retired, a pool started
    during the change (configured with the old count) runs them to their end."""
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 2, say=_say)
    before = Client.from_url(redis_url, namespace, shards=2)
    gid = _key_in(2, 1, "g")
    group = await before.group(
        [JobSpec(name="step", kwargs={"n": n}) for n in range(4)],
        then=JobSpec(name="step", kwargs={"n": 99}),
        group_id=gid,
    )
    head = await before.enqueue("step", job_id=_key_in(2, 1, "head-"), n=-1)
    chain = await before.chain(
        [JobSpec(name="step", kwargs={"n": n}, after=(head.id,)) for n in (10, 11)]
    )
    ran: list[int] = []
    async with Client.from_url(redis_url, namespace) as op:
        started = await resize(op, 1, wait=False, say=_say)
        assert not started.done
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=2))

        @pool.job(name="step")
        async def step(ctx: JobContext, n: int) -> None:
            ran.append(n)

        async with pool.running():
            done = await resize(op, 1, timeout=30, say=_say)
            assert done.done
        assert sorted(ran) == [-1, 0, 1, 2, 3, 10, 11, 99]
        assert group.then is not None
        assert (await op.job(group.then.id)) is None  # ran (results deleted at once)
        assert await op.group_progress(gid)
        assert all([await op.job(c.id) is None for c in chain])
    await before.close()


async def test_a_producer_from_before_is_refused_by_the_script_and_then_succeeds(
    redis_url: str, namespace: str
) -> None:
    stale = Client.from_url(redis_url, namespace)  # one shard, generation 0
    reader = Client.from_url(redis_url, namespace)  # reads by id, enqueues nothing
    async with Client.from_url(redis_url, namespace) as op:
        done = await resize(op, 3, say=_say)
        elsewhere = await op.enqueue("n", job_id=_key_in(3, 2, "r"))
    assert done.record == "3@2"
    # A miss by id reads the record again, and finds the job in a shard made since.
    found = await reader.job(elsewhere.id)
    assert found is not None and found.name == "n"
    await reader.close()
    shard0 = stale.admin.shards[0]
    row = to_row(JobSpec(name="n", job_id="x1"), 10_000, 60)
    with pytest.raises(ReplyError, match=r"^RESHARDED 3@2"):
        await calls.enqueue(shard0.scope, row, 0)
    _, failed = await calls.enqueue_batch(shard0.scope, [row, row._replace(id="x2")], 1)
    assert failed is not None and str(failed).startswith("RESHARDED 3@2")
    # A producer that passes no generation (another language's) is not checked.
    assert await calls.enqueue(shard0.scope, row) == ("x1", True)
    jobs = await stale.enqueue_many([JobSpec(name="n") for _ in range(30)])
    assert len({j.id for j in jobs}) == 30 and all(j.created for j in jobs)
    assert stale.admin.follower.route.record == ShardRecord(3, 3, 2)
    assert {shard_of(j.id, 3) for j in jobs} == {0, 1, 2}
    assert sum([await live_jobs(s) for s in stale.admin.shards]) == 32
    await stale.close()


@pytest.mark.parametrize("raw", ["text", "-1", "1e300", "257", "0", "3>x@1", "2>3"])
async def test_a_record_written_by_hand_is_one_line_naming_its_key(
    redis_url: str, namespace: str, redis_sync: redis.Redis, raw: str
) -> None:
    key = Keys(namespace).shards
    redis_sync.set(key, raw)
    async with Client.from_url(redis_url, namespace) as op:
        with pytest.raises(BadRecord, match=f"^{key}: '.*' is no shard count record"):
            await resize(op, 2)
        # A producer is not stuck: an enqueue goes on (the script reads no generation).
        assert (await op.enqueue("n")).created
    done = run_rota("shards", "resize", "2", "--redis-url", redis_url, "--namespace", namespace)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], lines


async def test_the_command_line_resizes_and_resumes(redis_url: str, namespace: str) -> None:
    done = run_rota("shards", "resize", "3", "--redis-url", redis_url, "--namespace", namespace)
    assert done.returncode == 0, done.stderr
    assert "done: 3@2" in done.stdout
    async with Client.from_url(redis_url, namespace, shards=3) as client:
        await client.enqueue_in(3600, "later", job_id=_key_in(3, 2, "j"))
    args = ["--redis-url", redis_url, "--namespace", namespace]
    cut = run_rota("shards", "resize", "1", "--no-wait", *args)
    assert cut.returncode == 3 and "under way (3>1@3)" in cut.stderr, cut.stderr
    assert "live jobs left:" in cut.stdout
    other = run_rota("shards", "resize", "2", *args)
    assert other.returncode == 1 and "finish it first" in other.stderr, other.stderr
    listed = run_rota("shards", *args)
    assert listed.returncode == 0, listed.stderr
    assert "3 shard(s) (a change of the count under way: 3>1@3)" in listed.stdout


async def test_a_move_cut_short_after_its_copy_resumes(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """3 -> 1 cut short in its move: a dead job copied to its new home but not yet
    deleted from its old one (what a command killed between the two leaves). Run again,
    the command finishes: the job is in its new home once, found by id, gone from the
    old shard."""
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 3, say=_say)
        job = await op.enqueue("n", job_id=_key_in(3, 2, "cut-"))
        old = op.admin.shards[2]
        await old.redis.lrem(old.keys.queue("n"), 0, job.id)
        await old.redis.hset(old.keys.job(job.id), mapping={"state": "dead", "reason": "x"})
        await old.redis.zadd(old.keys.dead, {job.id: 1000.0})
        await old.redis.rpush(old.keys.joblog(job.id), "a line")
        later = await op.enqueue_in(3600, "n", job_id=_key_in(3, 2, "later-"))
        started = await resize(op, 1, wait=False, say=_say)
        assert not started.done  # the later job holds the old shard
        assert await op.admin.delete("scheduled", [later.id]) == 1
        first = op.admin.shards[0]
        # The copy of the cut-short move, made by hand: the record and its set entry.
        dumped = redis_sync.dump(old.keys.job(job.id))
        assert isinstance(dumped, bytes)
        redis_sync.restore(first.keys.job(job.id), 0, dumped)
        redis_sync.zadd(first.keys.dead, {job.id: 1000.0})
        done = await resize(op, 1, say=_say)
        assert done.done and done.record == "1@4"
        assert not redis_sync.exists(old.keys.job(job.id), old.keys.dead, old.keys.joblog(job.id))
        assert redis_sync.zscore(first.keys.dead, job.id) == 1000.0
        assert await op.job_log(job.id) == ["a line"]
        found = await op.job(job.id)
        assert found is not None and found.state == "dead"
        assert (await op.admin.page("dead")).total == 1


async def test_a_running_pool_logs_a_record_written_by_hand_and_serves_on(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A record that is no record, written while a pool runs: the pool says so in one
    line (once) and goes on serving the shards it serves; a real change after it is
    followed again."""
    ran: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=1))

    @pool.job(name="n")
    async def n(ctx: JobContext, i: int) -> None:
        ran.append(i)

    key = Keys(namespace).shards
    with capture_logs() as logs:
        async with pool.running(), Client.from_url(redis_url, namespace) as op:
            redis_sync.set(key, "1e300")
            redis_sync.publish(Keys(namespace).pool_commands_told, "reshard")
            await wait_until(lambda: any(e["event"] == "shard record not followed" for e in logs))
            await op.enqueue("n", i=1)
            await wait_until(lambda: ran == [1])
            redis_sync.delete(key)
            await resize(op, 3, say=_say)
            await wait_until(lambda: any(e["event"] == "shard added" for e in logs))
            jobs = [await op.enqueue("n", i=i) for i in range(2, 12)]
            await wait_until(lambda: len(ran) == 11)
    bad = [e for e in logs if e["event"] == "shard record not followed"]
    assert len(bad) == 1 and key in bad[0]["error"], bad
    assert {shard_of(j.id, 3) for j in jobs} != {0}  # some ran in the shards added


async def test_a_fair_keys_settings_follow_it_to_its_new_home(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    while shard_tags(namespace, 2)[1] in shard_tags(namespace, 4):
        namespace += "x"
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 2, say=_say)
        key = next(k for n in range(500) if shard_of(k := f"k{n}", 2) == 1)
        await op.admin.fair.set_weight("n", key, 5)
        await op.admin.fair.pause_key("n", key)
        await op.admin.fair.set_key_limit("n", None, 3)
        await op.enqueue_in(3600, "other", job_id=_key_in(2, 1, "hold-"))  # holds the old shard
        assert not (await resize(op, 4, wait=False, say=_say)).done
        route = op.admin.follower.route
        old, new = route.home(key), route.named(key)
        assert old is not new
        fset = new.keys.fair_set("n")
        assert redis_sync.hget(fset, f"w/{key}") == b"5"
        assert redis_sync.hexists(fset, f"p/{key}")
        assert all(redis_sync.hget(s.keys.fair_set("n"), "l*") == b"3" for s in route.all)
        await op.admin.fair.set_key_limit("n", key, 7)  # during the change: both homes
        for there in (old, new):
            assert redis_sync.hget(there.keys.fair_set("n"), f"l/{key}") == b"7"


async def test_a_pass_of_the_old_count_cannot_leave_one_shard_below_its_whole(
    redis_url: str, namespace: str
) -> None:
    """2 -> 1 with a pool running: a rebalancer pass of the old count, under way when
    its pool took the new count, that lowers shard 0's part after the pool wrote its
    limit there (here written when the command sees no pool left in the retired shard)
    does not stay: one shard has no rebalancer to raise it back, so the command writes
    the whole again once no pool serves a retired shard."""
    settings = pool_settings(redis_url, namespace, concurrency=4, heartbeat_interval=0.2)
    pool = WorkerPool(settings=settings)

    @pool.job(name="cap", max_concurrency=2)
    async def cap(ctx: JobContext) -> None:
        pass

    sync = redis.Redis.from_url(redis_url)
    async with Client.from_url(redis_url, namespace) as op, pool.running():
        await resize(op, 2, timeout=60, say=_say)
        limits = op.admin.shards[0].keys.limits

        def lowered_after_the_write(line: str) -> None:
            _say(line)
            if line == "pools still in retired shards: none":  # what a late pass leaves
                sync.hset(limits, "cap", 1)

        await resize(op, 1, timeout=60, say=lowered_after_the_write)
        assert await op.admin.shards[0].redis.hget(limits, "cap") == b"2"
    sync.close()


async def test_a_limit_holds_and_follows_the_jobs_through_a_change(
    redis_url: str, namespace: str
) -> None:
    """A limit of 2 at one shard, then 1 -> 3 with the pool running: never more than 2
    run at once, and the jobs enqueued after the change (in the new shards, whose parts
    start at 0) run, so the limit followed them there; then 3 -> 1, and the whole is
    the one shard's part again."""
    running, peak, ran = 0, 0, Counter[str]()
    settings = pool_settings(redis_url, namespace, concurrency=8, heartbeat_interval=0.2)
    pool = WorkerPool(settings=settings)

    @pool.job(name="cap", max_concurrency=2)
    async def cap(ctx: JobContext, i: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await anyio.sleep(0.02)
        finally:
            running -= 1
            ran[ctx.id] += 1

    async with Client.from_url(redis_url, namespace) as op, pool.running():
        before = [(await op.enqueue("cap", i=i)).id for i in range(10)]
        await resize(op, 3, timeout=60, say=_say)
        after = [(await op.enqueue("cap", i=i)).id for i in range(30)]
        homes = {op.admin.follower.route.named(i).index for i in after}
        assert homes == {0, 1, 2}  # the new shards hold some
        await wait_until(lambda: set(ran) >= {*before, *after}, within=60)
        await resize(op, 1, timeout=60, say=_say)
        assert await op.admin.shards[0].redis.hget(op.admin.shards[0].keys.limits, "cap") == b"2"
        last = [(await op.enqueue("cap", i=i)).id for i in range(10)]
        await wait_until(lambda: set(ran) >= set(last), within=30)
    assert peak == 2  # reached, never passed
    assert max(ran.values()) == 1
