"""An idle pool costs Redis a few commands a second, whatever its concurrency."""

from __future__ import annotations

import threading
from collections import Counter

import anyio
import pytest

from rota import JobContext, WorkerPool
from tests.helpers import pool_settings
from tests.redis_server import RedisServer


def _monitor(server: RedisServer, seconds: float, sent: Counter[str]) -> None:
    """Count the commands clients send (MONITOR), leaving out those scripts run inside."""
    r = server.client()
    with r.monitor() as m:  # type: ignore[no-untyped-call]
        import time

        end = time.monotonic() + seconds
        for event in m.listen():
            if event["client_type"] != "lua" and event["command"] != "PING":
                sent[event["command"].split()[0].upper()] += 1
            if time.monotonic() > end:
                break
    r.close()


@pytest.mark.one_shard("an idle pool waits on every shard")
async def test_idle_pool_sends_at_most_three_commands_a_second(
    fresh_redis_server: RedisServer,
) -> None:
    pool = WorkerPool(settings=pool_settings(fresh_redis_server.url, "idle", concurrency=100))
    for i in range(10):

        async def handler(ctx: JobContext) -> None: ...

        pool.job(name=f"name{i}")(handler)

    sent: Counter[str] = Counter()
    async with pool.running():
        await anyio.sleep(1.0)  # let start-up settle
        watcher = threading.Thread(target=_monitor, args=(fresh_redis_server, 10.0, sent))
        watcher.start()
        await anyio.to_thread.run_sync(watcher.join)
    total = sum(sent.values())
    assert sent["BLPOP"] >= 2, f"the pool was not waiting on wake lists: {sent}"
    assert total <= 30, sent  # the bound of the issue; about 10 are expected


@pytest.mark.parametrize("shards", [1, 4])
async def test_an_idle_pool_waits_on_one_connection_whatever_its_shards_on_one_server(
    fresh_redis_server: RedisServer, shards: int
) -> None:
    """The shards of a pool on one server wait on their wake lists together: one BLPOP
    for the fetchers, one for the schedulers and one subscription for aborts, as with a
    single shard (a BLPOP per shard held four times as many; see rota.worker.waits)."""
    pool = WorkerPool(
        settings=pool_settings(fresh_redis_server.url, "idle", concurrency=20, shards=shards)
    )
    for i in range(5):

        async def handler(ctx: JobContext) -> None: ...

        pool.job(name=f"name{i}")(handler)

    async with pool.running():
        await anyio.sleep(0.5)  # every shard started and waiting
        with fresh_redis_server.client() as r:
            waiting = Counter(c["cmd"] for c in r.client_list())
    assert (waiting["blpop"], waiting["subscribe"]) == (2, 1), waiting
