"""The hand-off between a pool's fetcher and its workers: prefetching, the line of
waiting jobs, and closing."""

from __future__ import annotations

import asyncio

import pytest

from rota.protocol.job import now_ms
from rota.worker.handoff import PREFETCH_BELOW, Handoff
from rota.worker.runtime import Fetched


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


async def test_close_wakes_an_idle_worker_with_nothing() -> None:
    h = Handoff(concurrency=1)
    idle = asyncio.ensure_future(h.take())
    await asyncio.sleep(0)
    assert not idle.done()
    assert h.close() == []
    assert await asyncio.wait_for(idle, 1) is None


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


async def test_a_waiting_job_expires_there_and_a_taken_one_drops_its_timer() -> None:
    """The expiry timer of a job waiting in the line ends it at its expiry; a worker
    that takes a job first cancels its timer (no handle keeps a started job until its
    expiry, which may be hours away)."""
    h = Handoff(concurrency=1)
    ended: list[Fetched] = []
    soon, late = _job(1), _job(2)
    soon.expires = now_ms() + 30
    late.expires = now_ms() + 3_600_000
    h.put(late, ended.append)
    h.put(soon, lambda job: ended.append(job) if h.withdraw(job) else None)
    assert await h.take() is late
    assert [t.when() for t in h._expiring.values()] == [pytest.approx(_loop_in(0.03), abs=0.03)]
    await asyncio.sleep(0.1)
    assert ended == [soon] and h.waiting() == [] and h._expiring == {}


def _loop_in(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds
