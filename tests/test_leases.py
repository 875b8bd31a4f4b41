"""Leases and fencing, heartbeat, reaper, abort and wait."""

from __future__ import annotations

import time

import anyio
import msgspec
import pytest
import redis

import rota
from rota import Client, JobContext, LivePool, PoolJob, State, WorkerPool
from rota.protocol.scripts import script
from rota.protocol.snapshot import PoolSnapshot
from tests.helpers import finish_args, pool_settings, wait_until

FAST = {"lease": 1.0, "heartbeat_interval": 0.2}


async def lease_by_hand(client: Client, name: str, lease_ms: int = 200) -> list[bytes]:
    """Lease jobs the way a pool does, as a pool that then dies would leave them."""
    now = int(time.time() * 1000)
    flat, *_ = await script("fetch")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        [now, lease_ms, "ghost-pool", 10**6, 1, name],
        client.admin.shards[0].script_mode,
    )
    return list(flat)


async def finish_by_hand(client: Client, job_id: str, token: bytes, *fields: object) -> list[str]:
    """Send one outcome of a ``work`` job (outcome, a, b, c) as a pool's acker does; the
    ids the finish script found stale."""
    now = int(time.time() * 1000)
    args = finish_args(now, [job_id, "work", token, *fields])
    stale = await script("finish")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        args,
        client.admin.shards[0].script_mode,
    )
    return [i.decode() for i in stale]


async def test_heartbeat_writes_the_snapshot_and_keeps_long_jobs_leased(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60, **FAST))
    snapshots: list[PoolSnapshot] = []
    lives: list[LivePool] = []

    @pool.job
    async def long(ctx: JobContext) -> str:
        await ctx.checkin("halfway")
        await anyio.sleep(0.8)
        raw = redis_sync.get("{" + namespace + "}:pool:" + pool.runtime.pool_id)  # type: ignore[union-attr]
        assert raw is not None
        snapshots.append(msgspec.json.decode(raw, type=PoolSnapshot))
        lives.extend(await client.admin.pools())
        await anyio.sleep(1.7)  # well past the 1 s lease: the heartbeat extends it
        return "done"

    job = await client.enqueue("long")
    async with pool.running() as rt:
        assert await client.wait(job.id, timeout=10) == "done"
        assert redis_sync.zscore("{" + namespace + "}:pools", rt.pool_id) is not None
    snap = snapshots[0]
    assert (snap.id, snap.concurrency, snap.jobs, snap.namespace) == (
        rt.pool_id,
        10,
        ["long"],
        namespace,
    )
    assert [(b.job_id, b.name, b.message) for b in snap.busy] == [(job.id, "long", "halfway")]
    # client.admin.pools(), read just after the snapshot, has its times in seconds; Redis
    # keeps ms (a heartbeat may have written a newer snapshot in between)
    (live,) = lives
    assert (live.id, live.started_at, live.stale) == (rt.pool_id, snap.started_at / 1000, False)
    assert abs(live.heartbeat_at - snap.heartbeat_at / 1000) < 5
    heard = snap.busy[0].heard_at  # its checkin, at its start or just after
    assert snap.busy[0].since <= heard <= snap.heartbeat_at
    assert live.busy == [
        PoolJob(job.id, "long", snap.busy[0].since / 1000, "halfway", heard / 1000)
    ]
    assert abs(live.busy[0].since - time.time()) < 60
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.lost, record.attempts) == ("complete", 0, 1)
    # a stopped pool removes its heartbeat at once
    assert redis_sync.zscore("{" + namespace + "}:pools", rt.pool_id) is None
    assert redis_sync.exists("{" + namespace + "}:pool:" + rt.pool_id) == 0


#: Each outcome as the finish script takes it (outcome, a, b, c), and the state it leaves.
OUTCOMES = {
    "complete": (("complete", '"r"', 60000, ""), "complete"),
    "retry": (("retry", 0, "boom", "error"), "retry"),
    "dead": (("dead", "", "boom", "error"), "dead"),
    "aborted": (("aborted", 60000, "stop", ""), "aborted"),
    "requeue": (("requeue", "", "", ""), "queued"),
}


@pytest.mark.one_shard("calls one shard's scripts")
@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
async def test_a_finish_sent_again_after_it_was_recorded_is_no_stale_one(
    client: Client, redis_sync: redis.Redis, namespace: str, outcome: str
) -> None:
    """Redis killed after it wrote a finish and before its reply left: the pool sends
    the same outcome again. It changes nothing (no failure counted twice, no second
    entry in a queue or set) and is not counted or logged as stale, also when the job
    runs again meanwhile."""
    job = await client.enqueue("work")
    (token,) = (await lease_by_hand(client, "work", lease_ms=60000))[2:3]
    fields, state = OUTCOMES[outcome]
    p = "{" + namespace + "}:"

    def seen() -> tuple[object, ...]:
        rec = redis_sync.hgetall(p + "job:" + job.id)
        sets = [redis_sync.zcard(p + s) for s in ("retry", "dead", "complete", "running:work")]
        queue = redis_sync.lrange(p + "queue:work", 0, -1)
        return rec, sets, queue, redis_sync.hgetall(p + "stats")

    assert await finish_by_hand(client, job.id, token, *fields) == []
    before = seen()
    assert (await client.job(job.id)).state == state  # type: ignore[union-attr]
    for _ in range(2):
        assert await finish_by_hand(client, job.id, token, *fields) == []
    assert seen() == before
    assert "stale" not in await client.admin.stats()
    if outcome in ("retry", "requeue"):  # the job runs again: the old outcome stays applied
        if outcome == "retry":
            assert await client.admin.retry("retry", [job.id]) == 1  # due now: back in its queue
        (again,) = (await lease_by_hand(client, "work", lease_ms=60000))[2:3]
        assert int(again) == int(token) + 1
        assert await finish_by_hand(client, job.id, token, *fields) == []
        assert (await client.job(job.id)).state == "running"  # type: ignore[union-attr]
        assert "stale" not in await client.admin.stats()


@pytest.mark.one_shard("reads one shard's keys")
async def test_reaper_requeues_expired_leases_at_the_front(
    client: Client, redis_url: str, namespace: str
) -> None:
    orphan = await client.enqueue("work", n=0)
    flat = await lease_by_hand(client, "work")
    assert flat[0].decode() == orphan.id
    await client.enqueue("work", n=1)
    order: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=1, **FAST))

    @pool.job
    async def work(ctx: JobContext, n: int) -> None:
        order.append(n)

    await anyio.sleep(0.25)  # the ghost pool's lease is over
    started = time.monotonic()
    async with pool.running():
        # the queued job runs at once; the orphan comes back within a reaper period
        await wait_until(lambda: sorted(order) == [0, 1], within=5)
    assert time.monotonic() - started < 2
    stats = await client.admin.stats()
    assert stats["lost"] == 1
    assert "failed" not in stats


@pytest.mark.one_shard("calls one shard's scripts")
async def test_stale_finish_is_ignored_and_counted(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    job = await client.enqueue("work")
    first = await lease_by_hand(client, "work", lease_ms=1)
    await anyio.sleep(0.01)
    now = int(time.time() * 1000)
    reaped = await script("reap")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        [now, 3, 15000, 100],
        client.admin.shards[0].script_mode,
    )
    assert [i.decode() for i in reaped[0]] == [job.id]
    second = await lease_by_hand(client, "work")
    old_token, new_token = first[2], second[2]
    assert int(new_token) > int(old_token)
    assert await finish_by_hand(client, job.id, old_token, "dead", "", "late", "error") == [job.id]
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.lost) == ("running", 1)
    complete = ("complete", "7", 60000, "")
    assert await finish_by_hand(client, job.id, new_token, *complete) == []
    # the same finish sent again (its reply was lost) was recorded already: it changes
    # nothing and is no stale one; the reaped attempt's stays stale
    assert await finish_by_hand(client, job.id, new_token, *complete) == []
    assert await finish_by_hand(client, job.id, old_token, "dead", "", "late", "error") == [job.id]
    stats = await client.admin.stats()
    assert (stats["processed"], stats["stale"]) == (1, 2)
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.result) == ("complete", "7")


@pytest.mark.one_shard("reads one shard's keys")
async def test_poison_pill_goes_dead_after_max_lost(client: Client, namespace: str) -> None:
    job = await client.enqueue("crasher")
    for attempt in range(3):
        await lease_by_hand(client, "crasher", lease_ms=1)
        await anyio.sleep(0.01)
        now = int(time.time() * 1000)
        await script("reap")(
            client.admin.shards[0].redis,
            client.admin.shards[0].keys.prefix,
            [now, 3, 15000, 100],
            client.admin.shards[0].script_mode,
        )
        record = await client.job(job.id)
        assert record is not None
        assert record.lost == attempt + 1
    assert record is not None
    assert (record.state, record.reason) == ("dead", "lost")
    assert "lease expired 3 times" in (record.error or "")
    assert (await client.admin.page("dead")).total == 1


async def test_reaper_forgets_pools_that_stopped_beating(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    p = "{" + namespace + "}:"
    redis_sync.zadd(p + "pools", {"old": 1, "fresh": int(time.time() * 1000)})
    redis_sync.set(p + "pool:old", "{}")
    now = int(time.time() * 1000)
    _, _, forgotten = await script("reap")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        [now, 3, 15000, 100],
        client.admin.shards[0].script_mode,
    )
    assert forgotten == [b"old"]
    assert redis_sync.zrange(p + "pools", 0, -1) == [b"fresh"]
    assert redis_sync.exists(p + "pool:old") == 0


async def test_abort_queued_scheduled_and_running_jobs(
    client: Client, redis_url: str, namespace: str
) -> None:
    queued = await client.enqueue("sleeper", seconds=0)
    later = await client.enqueue_in(60, "sleeper", seconds=0)
    assert await client.abort(queued.id) == "queued"
    assert await client.abort(later.id) == "scheduled"
    assert await client.abort("no-such-job") == "missing"
    for jid in (queued.id, later.id):
        record = await client.job(jid)
        assert record is not None
        assert (record.state, record.reason) == ("aborted", "aborted")
    assert (await client.admin.queues(["sleeper"]))[0].size == 0
    assert (await client.admin.page("scheduled")).total == 0

    started = anyio.Event()
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def sleeper(ctx: JobContext, seconds: float) -> None:
        started.set()
        await anyio.sleep(seconds)

    running = await client.enqueue("sleeper", seconds=30)
    async with pool.running():
        await started.wait()
        t0 = time.monotonic()
        assert await client.abort(running.id) == "running"
        with pytest.raises(rota.JobFailed, match="aborted"):
            await client.wait(running.id, timeout=5)
        assert time.monotonic() - t0 < 3  # by the abort channel, not the 5 s heartbeat
    record = await client.job(running.id)
    assert record is not None
    assert (record.state, record.reason) == (State.ABORTED, "aborted")
    assert await client.abort(running.id) == "aborted"


async def test_wait_returns_results_and_raises_for_failures(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))  # keep_result=0
    go = anyio.Event()

    @pool.job(max_fails=1)
    async def maybe(ctx: JobContext, ok: bool) -> dict[str, bool]:
        if not ok:
            raise ValueError("said no")
        await go.wait()  # the wait has begun: the result is kept for no one else
        return {"ok": True}

    good = await client.enqueue("maybe", ok=True)
    bad = await client.enqueue("maybe", ok=False)
    async with pool.running():
        result: list[object] = []

        async def waiting() -> None:
            result.append(await client.wait(good.id, timeout=5))

        async def registered() -> bool:  # the wait script ran: the finish will tell it
            part = await client.admin.shard_holding(good.id)
            return bool(await part.redis.hexists(part.keys.job(good.id), "waiters"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting)
            await wait_until(registered, within=5)
            go.set()
        assert result == [{"ok": True}]
        with pytest.raises(
            rota.JobFailed, match=r"ended dead \(error\): ValueError: said no"
        ) as info:
            await client.wait(bad.id, timeout=5)
        assert (info.value.state, info.value.reason) == ("dead", "error")
        assert info.value.error == "ValueError: said no"
        with pytest.raises(rota.JobNotFound, match="nothing-here"):
            await client.wait("nothing-here", timeout=1)
        slow = await client.enqueue_in(30, "maybe", ok=True)
        with pytest.raises(TimeoutError, match=r"did not finish within 0\.2 s"):
            await client.wait(slow.id, timeout=0.2)


@pytest.mark.one_shard("writes one shard's keys")
async def test_poison_pill_with_nan_counters_still_goes_dead(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    job = await client.enqueue("crasher")
    redis_sync.hset("{" + namespace + "}:job:" + job.id, mapping={"lost": "nan", "max_lost": "nan"})
    for _ in range(3):
        await lease_by_hand(client, "crasher", lease_ms=1)
        await anyio.sleep(0.01)
        now = int(time.time() * 1000)
        await script("reap")(
            client.admin.shards[0].redis,
            client.admin.shards[0].keys.prefix,
            [now, 3, 15000, 100, "d", "m"],
            client.admin.shards[0].script_mode,
        )
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.reason, record.lost) == ("dead", "lost", 3)
