"""Helpers shared by the tests."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
import redis
import redis.exceptions

from rota import Client, JobContext, JobSpec, Settings, WorkerPool
from rota.client import Shard
from rota.protocol import calls
from rota.wire.link import Link
from rota.worker.rounds import BEAT, FETCH, every_pool, rounds_of


def finish_args(now: Any, fields: list[Any], complete_max: int = 100_000) -> list[Any]:
    """The finish script's arguments for attempts written as its seven fields each (id,
    name, token, outcome, a, b, c; see lua/finish.lua), in one MessagePack array as a
    pool's acker sends them: for tests that send what the Outcome types cannot say."""
    text = [f.decode() if isinstance(f, bytes) else f for f in fields]  # a token as read
    return [now, msgspec.msgpack.encode(text), complete_max]


def link_of(client: Client | Shard) -> Link | None:
    """The pipelined Link a client's (first) shard's hot path sends through, None when
    redis-py serves."""
    conn = (client if isinstance(client, Shard) else client.admin.shards[0]).conn
    return conn if isinstance(conn, Link) else None


def pool_settings(redis_url: str, namespace: str, **changes: Any) -> Settings:
    """Settings for a pool in a test: results deleted at once, a short grace; jobs that
    return None are kept as long as the others (``keep_none`` follows ``keep_result``)."""
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "namespace": namespace,
        "concurrency": 10,
        "keep_result": 0,
        "grace": 2.0,
        "shards": int(os.environ.get("ROTA_TEST_SHARDS", "1")),
    }
    values.update(changes)
    values.setdefault("keep_none", values["keep_result"])  # jobs that return None alike
    return Settings(**values)


async def wait_until(
    check: Callable[[], Awaitable[bool] | bool],
    within: float = 10.0,
    every: float = 0.01,
) -> None:
    """Poll ``check`` until it is true; fail the test after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await anyio.sleep(every)


def namespace_keys(r: redis.Redis, namespace: str) -> set[str]:
    """Every key of a namespace (SCAN: fine in tests, never on a hot path)."""
    return {k.decode() for k in r.scan_iter(match="{" + namespace + "}:*", count=1000)}


def fill_up(r: redis.Redis) -> None:
    """Set Redis's memory limit below what it uses: it refuses every write that grows its
    memory (with ``noeviction``) until the limit is raised again or memory is freed."""
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(max(used - 200_000, 1)))
    try:
        r.set("fill-up-probe", "x")
    except redis.exceptions.OutOfMemoryError:
        return
    raise AssertionError("Redis still takes writes: is its policy noeviction?")


def step_pool(redis_url: str, namespace: str) -> WorkerPool:
    """``step`` returns its label in capitals, or dies when the label starts with
    "fail"."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))

    @pool.job(max_fails=1)
    async def step(label: str) -> str:
        if label.startswith("fail"):
            raise RuntimeError(f"{label} fails")
        return label.upper()

    return pool


async def lease_tokens(client: Client, name: str, n: int) -> dict[str, str]:
    """Lease up to ``n`` jobs of ``name`` by the fetch script, as a pool would (a lease
    of 30 s): their tokens by id."""
    reply = await calls.fetch(
        client.admin.shards[0].scope, calls.Lessee(30000, "pool-1", 1 << 20), [name] * n, []
    )
    return {job.id: job.token for job in reply.jobs}


async def starts_by_priority(
    client: Client, settings: Settings, priorities: dict[str, int], starts: int
) -> list[tuple[str, int, str]]:
    """4,500 jobs of each name of ``priorities`` (kwargs ``seq`` 0, 1, ...), run by a
    pool of ``settings`` whose names have those priorities until ``starts`` have
    started, then every name paused: each start's name, seq and job id, in order."""
    started: list[tuple[str, int, str]] = []
    pool = WorkerPool(settings=settings)
    for name, priority in priorities.items():

        async def handler(ctx: JobContext, seq: int) -> None:
            started.append((ctx.name, seq, ctx.id))

        pool.job(name=name, priority=priority)(handler)

    for name in priorities:
        specs = [JobSpec(name=name, kwargs={"seq": i}) for i in range(4500)]
        for i in range(0, len(specs), 1500):
            await client.enqueue_many(specs[i : i + 1500])

    async with pool.running():
        await wait_until(lambda: len(started) >= starts, within=60)
        for name in priorities:
            await client.admin.pause(name)
    return started


async def rounds(
    pool: WorkerPool | None, kind: str = FETCH, n: int = 1, within: float = 15.0
) -> None:
    """Wait until the ``kind`` loop of every shard of the running ``pool`` (None: of every
    pool running in this process) has ended ``n`` rounds that began after this call (see
    :mod:`rota.worker.rounds`): a fetch, a beat, a reaper pass or a scheduler tick; after
    fetches, until the workers have taken every job fetched, too. A negative assert ("the
    paused job did not run", "nothing was handed out") after it means the pool had its
    chance; after a fixed sleep it passed trivially on a host too slow for the pool to
    have looked. Loops waiting for a wake token or a timeout are nudged to go at once."""
    if pool is None:
        marks = [(counts, counts.mark(kind) or {0: 0}) for counts in every_pool()]
        assert marks, "no pool is running"
        handoffs = []
    else:
        rt = pool.runtime
        assert rt is not None, "the pool is not running"
        counts = rounds_of(rt.pool_id)
        begun = counts.mark(kind)
        started = {shard for _, shard in counts.begun}  # every shard that began a loop
        marks = [(counts, {s: begun.get(s, 0) for s in started})]
        handoffs = [rt.handoff] if kind == FETCH else []

    def done() -> bool:
        for counts, _ in marks:
            counts.nudge(kind)  # a loop waiting for a token or its timeout goes at once
        ended = all(counts.since(kind, mark, n) for counts, mark in marks)
        return ended and not any(h.waiting() for h in handoffs)

    await wait_until(done, within=within, every=0.02)


def waiting_on_wake_lists(url: str) -> bool:
    """Whether a client of the server at ``url`` is blocked in BLPOP: a pool's fetcher
    waiting on its wake lists (what a test of that wait must see before it goes on; a
    fixed sleep let a slow host test the fetch that runs before the wait instead)."""
    with redis.Redis.from_url(url) as r:
        return any(c["cmd"] == "blpop" for c in r.client_list())


async def quiet_in(pool: WorkerPool, shard: int) -> None:
    """Assert that the running ``pool`` skips its beats in ``shard`` (its look over the
    shards found nothing there: see rota.worker.idle)."""
    run = pool.current_run
    assert run is not None and run.look is not None, "no look over the pool's shards"
    await rounds(pool, BEAT, n=2)  # past the start, and shard 0's first look
    skipped = run.heartbeats[shard].skipped
    await rounds(pool, BEAT, n=2)
    assert run.heartbeats[shard].skipped > skipped, "the pool still beats there"
