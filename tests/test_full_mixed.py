"""A full Redis with mixed work drains.

Over maxmemory (``noeviction``) Redis refuses the finishes that keep a result and runs
those that delete their job's record. A pool whose acker held a pool's worth of refused
outcomes used to stop fetching (the fetcher waits for room in the acker), and its acker
retried the refused batch with the others behind it: the jobs whose finish would free
the memory were never fetched, and the pool stood still. Now, while Redis refuses the
finishes that keep a result, the pool fetches only the jobs whose finish frees memory,
sends their outcomes at once, and offers the held results again every half second.

Such a Redis hovers at its limit: it refuses a held result, takes it once the other
finishes freed memory, and refuses the next. Each pool used to log a pair of lines
("refuses writes", "takes every command again") per refusal, about a hundred in a run;
now the whole drain is one episode per pool, with one line each way.
"""

from __future__ import annotations

import contextlib
from collections.abc import MutableMapping
from typing import Any

import pytest
import redis
from structlog.testing import capture_logs

from rota import Client, JobContext, JobSpec, State, WorkerPool
from rota.protocol.job import reply_text
from tests.helpers import fill_up, pool_settings, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


def _processed(r: redis.Redis, namespace: str) -> int:
    return int(r.hget("{" + namespace + "}:stats", "processed") or 0)


def _mixed_pool(
    url: str, namespace: str, runs: dict[str, int], result: int = 50, **settings: Any
) -> WorkerPool:
    """A pool with a job name whose finish frees memory (``frees``, 500 bytes of args)
    and one whose finish keeps a result (``keeps``, ``result`` bytes); ``runs`` counts
    the attempts."""
    pool = WorkerPool(settings=pool_settings(url, namespace, **settings))

    @pool.job(keep_result=0)
    async def frees(ctx: JobContext, i: int, pad: str) -> int:
        runs[ctx.id] = runs.get(ctx.id, 0) + 1
        return i

    @pool.job(keep_result=600)
    async def keeps(ctx: JobContext, i: int) -> str:
        runs[ctx.id] = runs.get(ctx.id, 0) + 1
        return "r" * result

    return pool


def _mixed(n: int, every: int) -> list[JobSpec]:
    """``n`` jobs, one in ``every`` keeping a result."""
    return [
        JobSpec(name="keeps", args=(i,))
        if i % every == 0
        else JobSpec(name="frees", args=(i, "p" * 500))
        for i in range(n)
    ]


async def test_a_full_redis_with_mixed_work_drains(
    full_redis_server: RedisServer, namespace: str
) -> None:
    r = full_redis_server.client()
    runs: dict[str, int] = {}
    pool = _mixed_pool(full_redis_server.url, namespace, runs, heartbeat_interval=0.2)
    async with Client.from_url(full_redis_server.url, namespace) as client:
        await client.enqueue_many(_mixed(3000, 10))
        kept = await _ids(client, "keeps")
        fill_up(r)
        async with pool.running():
            await wait_until(lambda: len(runs) == 3000, within=30)
            await wait_until(lambda: _processed(r, namespace) == 3000, within=30)
        records = [await client.job(j) for j in kept]
    assert set(runs.values()) == {1} and len(records) == 300  # each ran once
    assert all(rec is not None and rec.state == State.COMPLETE for rec in records)
    assert records and all(
        rec is not None and rec.result == '"' + "r" * 50 + '"' for rec in records
    )


def _lines(logs: list[MutableMapping[str, Any]], prefix: str) -> dict[str, int]:
    """How many lines starting with ``prefix`` each pool logged."""
    out: dict[str, int] = {}
    for e in logs:
        if str(e["event"]).startswith(prefix):
            out[e["pool"]] = out.get(e["pool"], 0) + 1
    return out


async def test_a_full_redis_hovering_at_its_limit_is_one_episode_per_pool(
    full_redis_server: RedisServer, namespace: str
) -> None:
    """One job in three keeps a result: the memory the others free is taken again by
    the held results, and Redis refuses and takes them by turns for the whole drain."""
    r = full_redis_server.client()
    runs: dict[str, int] = {}
    url = full_redis_server.url
    pools = [_mixed_pool(url, namespace, runs, 300, heartbeat_interval=0.2) for _ in range(2)]
    n = 6000
    async with Client.from_url(url, namespace) as client:
        await client.enqueue_many(_mixed(n, 3))
        fill_up(r)
        with capture_logs() as logs:
            async with contextlib.AsyncExitStack() as stack:
                ids = [(await stack.enter_async_context(p.running())).pool_id for p in pools]
                await wait_until(lambda: _processed(r, namespace) == n, within=40)
                r.config_set("maxmemory", "0")
                again = "Redis takes every command again"
                await wait_until(lambda: len(_lines(logs, again)) == 2)
    assert set(runs.values()) == {1} and len(runs) == n
    assert _lines(logs, "Redis refuses writes: out of memory") == dict.fromkeys(ids, 1)
    assert _lines(logs, again) == dict.fromkeys(ids, 1)


async def _ids(client: Client, name: str) -> list[str]:
    return [
        reply_text(x)
        for x in await client.admin.shards[0].redis.lrange(
            client.admin.shards[0].keys.queue(name), 0, -1
        )
    ]
