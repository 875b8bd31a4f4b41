"""A full Redis with mixed work drains.

Over maxmemory (``noeviction``) Redis refuses the finishes that keep a result and runs
those that delete their job's record. A pool whose acker held a pool's worth of refused
outcomes used to stop fetching (the fetcher waits for room in the acker), and its acker
retried the refused batch with the others behind it: the jobs whose finish would free
the memory were never fetched, and the pool stood still. Now, while Redis refuses the
finishes that keep a result, the pool fetches only the jobs whose finish frees memory,
sends their outcomes at once, and offers the held results again every half second.
"""

from __future__ import annotations

import pytest
import redis

from rota import Client, JobContext, JobSpec, State, WorkerPool
from rota.protocol.job import reply_text
from tests.helpers import fill_up, pool_settings, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


def _processed(r: redis.Redis, namespace: str) -> int:
    return int(r.hget("{" + namespace + "}:stats", "processed") or 0)


async def test_a_full_redis_with_mixed_work_drains(
    full_redis_server: RedisServer, namespace: str
) -> None:
    r = full_redis_server.client()
    pool = WorkerPool(
        settings=pool_settings(full_redis_server.url, namespace, heartbeat_interval=0.2)
    )
    runs: dict[str, int] = {}

    @pool.job(keep_result=0)
    async def frees(ctx: JobContext, i: int, pad: str) -> int:
        runs[ctx.id] = runs.get(ctx.id, 0) + 1
        return i

    @pool.job(keep_result=600)
    async def keeps(ctx: JobContext, i: int) -> str:
        runs[ctx.id] = runs.get(ctx.id, 0) + 1
        return "r" * 50

    specs = [
        JobSpec(name="keeps", args=(i,))
        if i % 10 == 0
        else JobSpec(name="frees", args=(i, "p" * 500))
        for i in range(3000)
    ]
    async with Client.from_url(full_redis_server.url, namespace) as client:
        await client.enqueue_many(specs)
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


async def _ids(client: Client, name: str) -> list[str]:
    return [reply_text(x) for x in await client.redis.lrange(client.keys.queue(name), 0, -1)]
