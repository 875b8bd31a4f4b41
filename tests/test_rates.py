"""Rate limits: how many jobs of a name start per second, across every pool.

The fetch script keeps one schedule per name in Redis, so pools share it; a pool whose
only work is rate-limited sleeps until the next start is due instead of polling.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from typing import Any

import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.scripts import script
from tests.cli_helpers import rota_json, run_rota
from tests.helpers import pool_settings, wait_until


def test_a_handler_with_a_bad_rate_is_refused_at_registration(redis_url: str) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, "r"))
    with pytest.raises(ValueError, match="job 'f': rate: 'lots' is not a rate"):

        @pool.job(rate="lots")
        async def f(ctx: JobContext) -> None: ...


@pytest.mark.one_shard("a split rate is exact while every shard has jobs; 500 jobs spread unevenly")
async def test_three_pools_share_one_rate(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """500 jobs at 50/s across three pools: never faster than the rate (10 s from the
    first start to the last, less 5 %), not far slower, and Redis is not polled
    meanwhile."""
    starts: list[float] = []
    other: list[float] = []
    pools = []
    for _ in range(3):
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=20))

        @pool.job(rate="50/s")
        async def limited(ctx: JobContext) -> None:
            starts.append(time.time())

        @pool.job
        async def free(ctx: JobContext) -> None:
            other.append(time.time())

        pools.append(pool)
    await client.enqueue_many([JobSpec(name="limited") for _ in range(500)])
    calls = _fcalls(redis_sync)
    async with AsyncExitStack() as stack:
        for pool in pools:
            await stack.enter_async_context(pool.running())
        await wait_until(lambda: len(starts) >= 50, within=10)
        # an unlimited name beside it is not held up by the limited one
        await client.enqueue_many([JobSpec(name="free") for _ in range(100)])
        await wait_until(lambda: len(other) == 100, within=5)
        assert max(other) < starts[0] + 5
        await wait_until(lambda: len(starts) == 500, within=30, every=0.2)
        span = max(starts) - min(starts)
        (q,) = [q for q in await client.admin.queues() if q.name == "limited"]
        assert q.rate == "50/s"
    # never early; how late follows the host: 10.0-10.2 s quiet, 12.2 s once with two
    # cores shared by three test processes and a profiler (a rate the pools kept a
    # third below would read 15)
    assert 9.5 <= span <= 14, span
    # Without polling: about one fetch per start in each pool (they all wake when the
    # next start is due), plus the wake-ups of the other jobs. Polling every ms would
    # make tens of thousands.
    assert _fcalls(redis_sync) - calls < 500 * 3 * 3, "the pools polled Redis"


def _fcalls(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return sum(int(stats.get(k, {}).get("calls", 0)) for k in ("cmdstat_fcall", "cmdstat_evalsha"))


@pytest.mark.one_shard("reads one shard's rate keys")
async def test_set_rate_at_run_time_and_clear_it(
    client: Client, redis_url: str, namespace: str
) -> None:
    starts: list[float] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def tick(ctx: JobContext) -> None:
        starts.append(time.time())

    await client.enqueue("tick")  # the name is known
    async with pool.running():
        await wait_until(lambda: len(starts) == 1)
        await client.admin.set_rate("tick", "5/s")
        (q,) = await client.admin.queues(["tick"])
        assert q.rate == "5/s"
        await client.enqueue_many([JobSpec(name="tick") for _ in range(10)])
        await wait_until(lambda: len(starts) == 11, within=10)
        # 10 starts at 5/s: about 1.6 s from the second to the last (a burst of 2 first)
        assert starts[-1] - starts[1] >= 1.0, starts
        await client.admin.set_rate("tick", None)
        assert (await client.admin.queues(["tick"]))[0].rate is None
        begun = time.time()
        await client.enqueue_many([JobSpec(name="tick") for _ in range(50)])
        await wait_until(lambda: len(starts) == 61, within=10)
        assert max(starts) - begun < 5  # no longer held to 5/s (10 s for 50)
    with pytest.raises(ValueError, match="rate: "):
        await client.admin.set_rate("tick", "often")


async def test_a_pool_writes_its_handlers_rates(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(rate="2/min")
    async def slow(ctx: JobContext) -> None: ...

    async with pool.running():
        (q,) = await client.admin.queues(["slow"])
        assert q.rate == "2/min"


@pytest.mark.one_shard("the CLI is configured with one shard")
async def test_the_cli_sets_and_clears_a_rate(
    client: Client, redis_url: str, namespace: str
) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    await client.enqueue("mail")
    done = run_rota("queue", "rate", "mail", "20/min", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "mail: at most 20/min start")
    assert (await client.admin.queues(["mail"]))[0].rate == "20/min"
    status = rota_json("status", *conn)
    assert [q["rate"] for q in status["queues"]] == ["20/min"]
    bad = run_rota("queue", "rate", "mail", "often", *conn)
    assert bad.returncode == 2 and "rate: 'often' is not a rate" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    both = run_rota("queue", "rate", "mail", "5/s", "--clear", *conn)
    assert both.returncode == 2
    cleared = run_rota("queue", "rate", "mail", "--clear", *conn)
    assert (cleared.returncode, cleared.stdout.strip()) == (0, "mail: no rate limit")
    assert (await client.admin.queues(["mail"]))[0].rate is None


@pytest.mark.one_shard("calls one shard's fetch script")
@pytest.mark.parametrize("behind_ms", [1, 900, 2_000, 30_000])
async def test_a_pool_whose_clock_is_behind_takes_no_slot_another_took(
    client: Client, redis_sync: redis.Redis, behind_ms: int
) -> None:
    """Each pool sends its own clock: one a little behind (another host, or a call sent
    a moment before another's that ran first) reads a next start up to one interval
    ahead of its now. It is a start to wait for, not garbage to reset: a reset gave that
    pool the slots the first had just taken, past the rate."""
    redis_sync.hset(client.admin.shards[0].keys.rates, "r", "1/1000")  # one a second
    await client.enqueue_many([JobSpec(name="r") for _ in range(10)])
    now = int(time.time() * 1000)

    async def fetch(at: int) -> None:
        args: list[str | int] = [at, 30000, "pool-1", 1 << 20, 1, "r", 0]
        await script("fetch")(
            client.admin.shards[0].redis,
            client.admin.shards[0].keys.prefix,
            args,
            client.admin.shards[0].script_mode,
        )

    await fetch(now)
    first = redis_sync.zcard(client.admin.shards[0].keys.running("r"))
    assert first >= 1
    await fetch(now - behind_ms)
    assert redis_sync.zcard(client.admin.shards[0].keys.running("r")) == first
