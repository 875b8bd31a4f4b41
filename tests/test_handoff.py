"""The hand-off between fetcher and workers, and prefetching, on their own and in a pool."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import cast

import anyio
import pytest

from rota import Client, JobContext, WorkerPool
from rota.worker.handoff import PREFETCH_BELOW, Handoff
from rota.worker.runtime import Fetched
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer


def _job(i: int) -> Fetched:
    return Fetched(f"j{i}", "noop", "1", 1, 0, 0, b"[]", 0, None, None)


def _warm(h: Handoff) -> Handoff:
    """As after as many short jobs as workers: prefetching is on."""
    h.finished = h.concurrency
    return h


def test_a_fresh_pool_does_not_prefetch_until_its_jobs_prove_short() -> None:
    h = Handoff(concurrency=3, prefetch=3)
    assert h.capacity == 3
    h.running = 3
    for _ in range(2):
        h.done(0.001)
    assert h.capacity == 3
    h.done(0.001)
    assert h.capacity == 6
    slow = Handoff(concurrency=2, prefetch=2)
    slow.running = 2
    slow.done(5.0)  # the first job sets the average at once
    slow.done(0.001)
    assert slow.avg_duration > PREFETCH_BELOW and slow.capacity == 2


async def test_idle_workers_get_jobs_first_then_the_line_holds_them() -> None:
    h = _warm(Handoff(concurrency=2, prefetch=2))
    assert h.room() == 4
    takers = [asyncio.ensure_future(h.take()) for _ in range(2)]
    await asyncio.sleep(0)
    for i in range(4):
        h.put(_job(i))
    assert [(await t).id for t in takers] == ["j0", "j1"]  # type: ignore[union-attr]
    assert (h.running, h.waiting()) == (2, [_job(2), _job(3)])
    assert h.room() == 0
    job = await h.take()
    assert job is not None and job.id == "j2" and h.running == 3


async def test_the_fetcher_waits_for_a_useful_batch_while_jobs_wait() -> None:
    h = _warm(Handoff(concurrency=8, prefetch=8))  # capacity 16: refill at 4 free
    for i in range(16):
        h.put(_job(i))
    for _ in range(8):
        await h.take()
    waiter = asyncio.ensure_future(h.wait_room())
    for n in range(3):
        h.done(0.001)
        await asyncio.sleep(0)
        assert not waiter.done(), n
    h.done(0.001)
    assert await waiter == 4


async def test_the_fetcher_refills_at_once_when_the_line_runs_dry() -> None:
    h = _warm(Handoff(concurrency=8, prefetch=8))
    for i in range(16):
        h.put(_job(i))
    waiter = asyncio.ensure_future(h.wait_room())
    for _ in range(8):
        await h.take()
    h.done(0.001)
    await asyncio.sleep(0)
    assert not waiter.done()
    for _ in range(8):  # the line is empty now: any room is worth a fetch
        await h.take()
    assert await waiter == 1


def test_long_jobs_turn_prefetching_off() -> None:
    h = _warm(Handoff(concurrency=4, prefetch=100))
    assert (h.prefetch, h.capacity) == (4, 8)  # never more than concurrency
    h.running = 100
    for _ in range(100):
        h.done(PREFETCH_BELOW * 4)
    assert h.avg_duration > PREFETCH_BELOW
    assert h.capacity == 4
    assert Handoff(concurrency=4, prefetch=0).capacity == 4


async def test_close_returns_the_waiting_jobs_and_releases_idle_workers() -> None:
    h = _warm(Handoff(concurrency=2, prefetch=2))
    idle = asyncio.ensure_future(h.take())
    await asyncio.sleep(0)
    h.put(_job(0))  # to the idle worker
    h.put(_job(1))
    h.put(_job(2))
    assert (await idle) == _job(0)
    second_idle = asyncio.ensure_future(h.take())
    assert (await second_idle) == _job(1)
    third_idle = asyncio.ensure_future(h.take())
    assert (await third_idle) == _job(2)
    blocked = asyncio.ensure_future(h.take())
    await asyncio.sleep(0)
    h.put(_job(3))
    h.put(_job(4))
    assert (await blocked) == _job(3)
    assert h.close() == [_job(4)]
    assert await asyncio.wait_for(h.take(), 1) is None


async def test_a_cancelled_taker_gives_its_job_back_to_the_front() -> None:
    h = Handoff(concurrency=2)
    taker = asyncio.ensure_future(h.take())
    await asyncio.sleep(0)
    h.put(_job(0))  # handed over, but the taker is cancelled before it resumes
    h.put(_job(1))
    taker.cancel()
    with pytest.raises(asyncio.CancelledError, match=r"^$"):
        await taker
    assert h.running == 0
    assert [j.id for j in h.waiting()] == ["j0", "j1"]


async def test_prefetched_jobs_keep_their_leases_and_go_back_on_drain(
    client: Client, redis_url: str, namespace: str
) -> None:
    """Jobs leased ahead wait longer than the lease behind a slow one: the heartbeat
    extends their leases, so none is reclaimed and run twice; stopping gives the ones
    not started back to their queue. Every job is counted."""
    runs: collections.Counter[str] = collections.Counter()
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, concurrency=2, prefetch=2, lease=0.6, heartbeat_interval=0.1
        )
    )

    @pool.job
    async def work(ctx: JobContext, seconds: float) -> None:
        runs[ctx.id] += 1
        await anyio.sleep(seconds)

    fast = [await client.enqueue("work", seconds=0.01) for _ in range(20)]
    async with pool.running() as rt:
        await wait_until(lambda: all(runs[j.id] for j in fast))
        slow = [await client.enqueue("work", seconds=1.5) for _ in range(2)]
        rest = [await client.enqueue("work", seconds=0.01) for _ in range(2)]
        await wait_until(lambda: all(runs[j.id] for j in slow))
        await wait_until(lambda: len(rt.handoff.waiting()) == 2)
        await anyio.sleep(1.0)  # longer than the lease: the heartbeat must hold them
        assert sorted(j.id for j in rt.handoff.waiting()) == sorted(j.id for j in rest)
        late = [await client.enqueue("work", seconds=0.01) for _ in range(3)]
        await wait_until(lambda: all(runs[j.id] for j in rest), within=5)
    assert max(runs.values()) == 1, runs
    queued = cast(
        list[bytes],
        await client.admin.shards[0].redis.lrange(client.admin.shards[0].keys.queue("work"), 0, -1),
    )
    ran = {j.id for j in late if runs[j.id]}
    assert {j.id for j in late} == ran | {q.decode() for q in queued}
    assert (
        await client.admin.shards[0].redis.zcard(client.admin.shards[0].keys.running("work")) == 0
    )


async def test_close_wakes_an_idle_worker_with_nothing() -> None:
    h = Handoff(concurrency=1)
    idle = asyncio.ensure_future(h.take())
    await asyncio.sleep(0)
    assert not idle.done()
    assert h.close() == []
    assert await asyncio.wait_for(idle, 1) is None


async def test_an_idle_pool_stops_at_once_and_a_wake_starts_a_job_in_one_write(
    client: Client, redis_url: str, namespace: str
) -> None:
    """An idle fetcher sends its BLPOP and the fetch behind it in one write: a new job
    starts without a further round trip, its lease counted from the server's clock; and
    a stopping pool ends that wait (CLIENT UNBLOCK) instead of waiting out wake_timeout."""
    started: list[float] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, wake_timeout=30, keep_result=60))

    @pool.job
    async def ping(ctx: JobContext) -> None:
        started.append(time.time())

    async with pool.running():
        await anyio.sleep(0.3)  # the fetcher waits on its wake list now
        before = time.time()
        job = await client.enqueue("ping")
        await wait_until(lambda: len(started) == 1, within=2)
        record = await client.admin.shards[0].redis.hmget(
            client.admin.shards[0].keys.job(job.id), "started_at", "attempts"
        )
        assert record[0] is not None and record[1] is not None
        assert int(record[1]) == 1
        assert abs(int(record[0]) / 1000 - before) < 1.0  # the server's clock, not stale
        await anyio.sleep(0.2)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 15  # the 30 s BLPOP was unblocked, not waited out
    assert (
        await client.admin.shards[0].redis.zcard(client.admin.shards[0].keys.running("ping")) == 0
    )


async def test_a_user_refused_client_commands_still_runs_and_stops(
    fresh_redis_server: RedisServer,
) -> None:
    """Without CLIENT (ACL), the fetcher cannot learn its id to be unblocked: it still
    runs jobs, and a stopping pool waits out its BLPOP (wake_timeout) instead."""
    r = fresh_redis_server.client()
    r.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                  commands=["+@all", "-client"])  # fmt: skip
    url = f"redis://app:pw@127.0.0.1:{fresh_redis_server.port}/0"
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(url, "acl", wake_timeout=0.5))

    @pool.job
    async def ping(ctx: JobContext) -> None:
        ran.append(ctx.id)

    async with Client.from_url(url, "acl") as client, pool.running():
        await anyio.sleep(0.2)
        await client.enqueue("ping")
        await wait_until(lambda: len(ran) == 1, within=3)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 10  # the 0.5 s BLPOP is waited out, and no more


async def test_jobs_given_back_on_drain_keep_their_order(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, concurrency=2, prefetch=2, grace=0.1)
    )
    runs: list[str] = []

    @pool.job
    async def work(ctx: JobContext, seconds: float) -> None:
        runs.append(ctx.id)
        await anyio.sleep(seconds)

    warm = [await client.enqueue("work", seconds=0.001) for _ in range(4)]
    async with pool.running() as rt:
        await wait_until(lambda: len(runs) == len(warm))
        slow = [await client.enqueue("work", seconds=5) for _ in range(2)]
        await wait_until(lambda: all(j.id in runs for j in slow))
        fast = [await client.enqueue("work", seconds=0.001) for _ in range(6)]
        await wait_until(lambda: len(rt.handoff.waiting()) == 2)
    queued = [
        q.decode()
        for q in cast(
            list[bytes],
            await client.admin.shards[0].redis.lrange(
                client.admin.shards[0].keys.queue("work"), 0, -1
            ),
        )
    ]
    next_up = queued[::-1]  # fetch pops at the tail
    assert set(next_up[:2]) == {j.id for j in slow}  # cancelled at shutdown: at the front
    assert next_up[2:] == [j.id for j in fast]  # the leased ones, then the rest, in order


async def test_a_fetcher_that_takes_its_turn_passes_it_on_while_room_is_left() -> None:
    """Fetchers of several shards queue for room. One whose turn comes and that waits on
    its wake lists takes no room: the next in line must go at once, not when a job ends
    (a pool whose queues are all paused has none, and its other shards never fetched)."""
    h = Handoff(concurrency=10)
    h.reserve(5)
    h.reserve(5)  # two fetches under way hold all the room
    turns = [asyncio.ensure_future(h.wait_room()) for _ in range(3)]
    await asyncio.sleep(0)
    h.release(5)  # one is back: the first in line has its turn, and waits (takes none)
    await asyncio.sleep(0)
    assert turns[0].done() and not turns[1].done()
    h.reserve(0)
    h.release(5)
    await asyncio.sleep(0)
    assert turns[1].done()
    h.reserve(0)
    await asyncio.sleep(0)
    assert turns[2].done(), "the last fetcher was never given its turn"


async def test_while_a_fetch_is_under_way_another_waits_for_a_useful_batch() -> None:
    """A fetch costs Redis about ten commands whatever it leases: while one is under
    way, another shard's fetcher waits until a quarter of the room is free, rather than
    leasing each slot as a job ends."""
    h = Handoff(concurrency=40)
    h.running = 30
    h.reserve(10)
    turn = asyncio.ensure_future(h.wait_room())
    for _ in range(9):
        h.done(0.001)
        await asyncio.sleep(0)
        assert not turn.done(), f"went for a batch of {h.room()}"
    h.done(0.001)
    await asyncio.sleep(0)
    assert turn.done() and turn.result() == 10
    # With no fetch under way and the line empty, one free slot is worth a fetch.
    idle = Handoff(concurrency=40)
    idle.running = 39
    assert await idle.wait_room() == 1
