"""Pages of a namespace over four shards are exact at any depth: a job set's, the kept
complete jobs' and a queue's page at an offset equals the slice of the merged order
computed from every entry (rota.client.pages)."""

from __future__ import annotations

import contextlib
import functools
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast
from unittest import mock

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rota import Client, JobSpec
from rota.client import pages, queue_pages
from rota.client.shard import Shard
from rota.inspect import queue_view
from rota.protocol.job import JobSet, opt_int

K = 4
Entry = tuple[int, str, float]  # shard, id, score


@pytest.fixture
async def sharded(redis_url: str, namespace: str) -> AsyncIterator[Client]:
    async with Client.from_url(redis_url, namespace, shards=K) as c:
        yield c


def _key(s: Shard, which: str) -> str:
    return s.keys.complete if which == "complete" else s.set_key(cast("JobSet", which))


async def _fill_set(shards: Sequence[Shard], key: str, entries: Sequence[Entry]) -> None:
    for s in shards:
        mine = {i: score for at, i, score in entries if at == s.index}
        z = _key(s, key)
        for n in range(0, len(mine), 5000):
            part = dict(list(mine.items())[n : n + 5000])
            await s.redis.zadd(z, part)
            pipe = s.redis.pipeline(transaction=False)
            for i in part:
                pipe.hset(s.keys.job(i), mapping={"name": "n", "enqueued_at": "1"})
            await pipe.execute()


def _set_order(entries: Sequence[Entry]) -> list[str]:
    """The merged order: by score, then id as bytes (as ZRANGE orders one shard)."""
    return [i for at, i, score in sorted(entries, key=lambda e: (e[2], e[1].encode(), e[0]))]


def _spread(n: int, rng: random.Random, scores: int) -> list[Entry]:
    return [
        (rng.randrange(K), f"j{rng.randrange(10**9):09d}-{k}", rng.randrange(scores))
        for k in range(n)
    ]


async def _ids(shards: Sequence[Shard], which: str, offset: int, count: int) -> list[str]:
    read = functools.partial(_key, which=which)
    _, rows = await pages.set_page(shards, read, offset, count, newest=which == "dead")
    return [i for _, i, _ in rows]


async def test_a_deep_page_of_a_job_set_is_the_merged_order(sharded: Client) -> None:
    rng = random.Random(7)
    entries = _spread(10_000, rng, 3000)  # many equal scores across the shards
    shards = sharded.admin.shards
    await _fill_set(shards, "scheduled", entries)
    await _fill_set(shards, "dead", entries)
    order = _set_order(entries)
    sizes = [sum(1 for e in entries if e[0] == s) for s in range(K)]
    edges = [sum(sizes[: s + 1]) for s in range(K)]
    offsets = [0, 1, 9000, 9999, 10_000 - 25, 10_000, 12_000]
    offsets += [e + d for e in edges for d in (-1, 0, 1)]
    for offset in offsets:
        assert await _ids(shards, "scheduled", offset, 25) == order[offset : offset + 25], offset
        newest = order[::-1][offset : offset + 25]
        assert await _ids(shards, "dead", offset, 25) == newest, offset
    page = await sharded.admin.page("scheduled", 9000, 30)
    assert page.total == 10_000
    assert [j.id for j in page.jobs] == order[9000:9030]
    page = await sharded.admin.page("dead", 5000, 30)  # equal scores: ids from the last
    assert [j.id for j in page.jobs] == order[::-1][5000:5030]


async def test_a_page_inside_a_run_of_equal_scores(sharded: Client) -> None:
    rng = random.Random(3)
    entries = [(rng.randrange(K), f"id{rng.randrange(10**6):06d}-{k}", 5.0) for k in range(5000)]
    entries += [(k % K, f"a-{k}", 4.0) for k in range(10)] + [
        (k % K, f"z-{k}", 6.0) for k in range(10)
    ]
    # scores written by hand: infinite ones, and ids beyond ASCII (ordered as bytes)
    entries += [(k % K, f"inf-{k}", float("inf")) for k in range(5)]
    entries += [(k % K, f"-inf-{k}", float("-inf")) for k in range(5)]
    entries += [(k % K, f"id{k}-é", 5.0) for k in range(5)] + [(1, "idz\u00ff", 5.0)]
    await _fill_set(sharded.admin.shards, "retry", entries)
    order = _set_order(entries)
    assert order[:5] == [f"-inf-{k}" for k in range(5)]
    for offset in (0, 4, 5, 9, 10, 2500, 5000, 5010, 5021):
        assert await _ids(sharded.admin.shards, "retry", offset, 20) == order[offset : offset + 20]


async def test_a_deep_page_of_the_complete_jobs_in_a_window(sharded: Client) -> None:
    rng = random.Random(11)
    entries = [(s, i, float(1_700_000_000_000 + t)) for s, i, t in _spread(4000, rng, 2000)]
    await _fill_set(sharded.admin.shards, "complete", entries)
    since, until = 1_700_000_000.2, 1_700_000_001.5  # seconds: ms 200 to 1500
    inside = [e for e in entries if 1_700_000_000_200 <= e[2] <= 1_700_000_001_500]
    order = _set_order(inside)
    for offset in (0, 1500, len(order) - 10):
        for newest in (False, True):
            got = await sharded.admin.finished(
                since=since,
                until=until,
                order="newest" if newest else "oldest",
                offset=offset,
                count=20,
            )
            want = (order[::-1] if newest else order)[offset : offset + 20]
            assert got.size == len(order)
            assert [j.id for j in got.jobs] == want


# -- queues ------------------------------------------------------------------------------


def _searched(raw: Sequence[float], p: int) -> float:
    """A job's time as the order defines it, by brute force: the least c among the
    list's times whose whole binary search (right where a time is at most c) ends past
    ``p``."""

    def ends(c: float) -> int:
        lo, hi = 0, len(raw)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if raw[mid] <= c else (lo, mid)
        return lo

    return min(c for c in raw if ends(c) > p)


def _queue_order(lists: Sequence[Sequence[tuple[str, float]]]) -> list[str]:
    keyed = []
    for s, jobs in enumerate(lists):
        raw = [t for _, t in jobs]
        keyed += [(_searched(raw, p), s, p, i) for p, (i, _) in enumerate(jobs)]
    return [i for *_, i in sorted(keyed)]


async def _fill_queue(
    shards: Sequence[Shard], name: str, lists: Sequence[Sequence[tuple[str, object]]]
) -> None:
    """Each shard's queue, oldest first, its jobs' enqueued_at as given (None: none)."""
    for s, jobs in zip(shards, lists, strict=True):
        if not jobs:
            continue
        pipe = s.redis.pipeline(transaction=False)
        pipe.lpush(s.keys.queue(name), *[i for i, _ in jobs])  # the last at the head
        for i, t in jobs:
            fields: dict[Any, Any] = (
                {"name": name} if t is None else {"name": name, "enqueued_at": str(t)}
            )
            pipe.hset(s.keys.job(i), mapping=fields)
        await pipe.execute()


async def _queue_ids(shards: Sequence[Shard], offset: int, count: int, newest: bool) -> list[str]:
    *_, rows = await queue_pages.queue_page(shards, "q", offset, count, newest=newest)
    return [i for _, i in rows]


async def test_a_deep_page_of_a_queue_is_the_merged_enqueue_order(sharded: Client) -> None:
    rng = random.Random(5)
    lists: list[list[tuple[str, float]]] = [[] for _ in range(K)]
    at = 1_700_000_000_000
    for k in range(10_000):
        at += rng.choice((0, 0, 1, 3))  # jobs enqueued in the same ms too
        lists[rng.randrange(K)].append((f"job{k:05d}", at))
    await _fill_queue(sharded.admin.shards, "q", lists)
    order = sorted(((t, s, p, i) for s, jobs in enumerate(lists) for p, (i, t) in enumerate(jobs)))
    ids = [i for *_, i in order]
    edges = [sum(len(x) for x in lists[: s + 1]) for s in range(K)]
    for offset in [0, 9000, 9975, 10_000, *(e + d for e in edges for d in (-1, 1))]:
        assert (
            await _queue_ids(sharded.admin.shards, offset, 25, False) == ids[offset : offset + 25]
        )
        assert (
            await _queue_ids(sharded.admin.shards, offset, 25, True)
            == ids[::-1][offset : offset + 25]
        )


async def test_a_queue_out_of_time_order_with_hand_written_times_tiles(sharded: Client) -> None:
    rng = random.Random(9)
    odd: list[object] = ["text", "nan", "1e300", None, "inf", -5, "12.5"]
    lists: list[list[tuple[str, object]]] = [[] for _ in range(K)]
    for k in range(600):
        t: object = 1000 + k if rng.random() < 0.8 else rng.choice([*odd, 1, 5000])
        lists[rng.randrange(K)].append((f"x{k:04d}", t))
    await _fill_queue(sharded.admin.shards, "q", lists)
    # a record that is no hash
    first = sharded.admin.shards[0]
    gone = lists[0][3][0]
    await first.redis.delete(first.keys.job(gone))
    await first.redis.set(first.keys.job(gone), "not a hash")

    def ms(i: str, t: object) -> float:
        # as a record's whole ms are read: anything else (and a record that is no
        # hash) is 0
        return 0 if i == gone or t is None else opt_int(str(t)) or 0

    order = _queue_order([[(i, ms(i, t)) for i, t in jobs] for jobs in lists])
    tiled = []
    for offset in range(0, 600, 23):
        tiled += await _queue_ids(sharded.admin.shards, offset, 23, False)
    assert tiled == order
    assert await _queue_ids(sharded.admin.shards, 100, 50, True) == order[::-1][100:150]


async def test_the_queue_view_over_shards_reads_the_chosen_jobs(sharded: Client) -> None:
    await sharded.enqueue_many([JobSpec(name="q", args=(n,)) for n in range(1500)])
    await sharded.enqueue_many([JobSpec(name="q", fair_key="k", args=(-1,)) for _ in range(3)])
    view = await queue_view(sharded, "q", offset=1200, limit=30)
    assert view.total == 1500 and view.keyed == 3
    whole = await queue_view(sharded, "q", offset=0, limit=1500)
    assert [j.id for j in view.jobs] == [j.id for j in whole.jobs][1200:1230]
    times = [j.enqueued_at or 0 for j in whole.jobs]
    assert times == sorted(times)
    assert {j.args for j in whole.jobs} == {f"[{n}]" for n in range(1500)}
    tiled = []
    for offset in range(0, 1500, 100):
        tiled += [j.id for j in (await queue_view(sharded, "q", offset=offset, limit=100)).jobs]
    assert tiled == [j.id for j in whole.jobs]
    newest = await queue_view(sharded, "q", offset=1200, limit=30, newest=True)
    assert [j.id for j in newest.jobs] == [j.id for j in whole.jobs][::-1][1200:1230]


# -- any spread ----------------------------------------------------------------------------

SPREAD = st.lists(st.tuples(st.integers(0, K - 1), st.integers(0, 12)), max_size=300)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    spread=SPREAD,
    offset=st.integers(0, 320),
    count=st.integers(1, 40),
    newest=st.booleans(),
    small=st.booleans(),
)
def test_any_spread_pages_exactly(
    redis_url: str,
    spread: list[tuple[int, int]],
    offset: int,
    count: int,
    newest: bool,
    small: bool,
) -> None:
    """``small``: windows of 2 entries, searches of 2 probes and 1 level a read, so that
    every step of the selection runs on a few hundred entries."""
    with contextlib.ExitStack() as stack:
        if small:
            stack.enter_context(mock.patch.object(pages, "WINDOW", 2))
            stack.enter_context(mock.patch.object(pages, "PROBES", 2))
            stack.enter_context(mock.patch.object(queue_pages, "DEPTH", 1))
        anyio.run(_any_spread, redis_url, spread, offset, count, newest)


async def _any_spread(
    redis_url: str, spread: list[tuple[int, int]], offset: int, count: int, newest: bool
) -> None:
    async with Client.from_url(redis_url, "h" + uuid.uuid4().hex[:12], shards=K) as c:
        shards = c.admin.shards
        entries = [(s, f"i{n:03d}", float(score)) for n, (s, score) in enumerate(spread)]
        await _fill_set(shards, "waiting", entries)
        order = _set_order(entries)
        want = (order[::-1] if newest else order)[offset : offset + count]
        key = lambda s: s.set_key("waiting")  # noqa: E731
        _, rows = await pages.set_page(shards, key, offset, count, newest=newest)
        assert [i for _, i, _ in rows] == want
        # the same spread as queues, each list in its own (any) time order
        lists = [[(i, t) for s, i, t in entries if s == k] for k in range(K)]
        await _fill_queue(shards, "q", lists)
        got = await _queue_ids(shards, offset, count, newest)
        qorder = _queue_order(lists)
        assert got == (qorder[::-1] if newest else qorder)[offset : offset + count]
