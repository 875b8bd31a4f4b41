"""A blocking pop never outlasts its connection's read timeout.

redis-py times a read out after ``socket_timeout`` whatever the command, so a ``BLPOP``
asked to wait longer (a ``scheduler_interval`` or ``wake_timeout`` above it) failed as
"Redis cannot be reached", once a wait, on a Redis that answered all along. Here the
pool's URL sets a read timeout of one second and its waits are of three.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from redis.asyncio import Redis

from rota import WorkerPool
from rota.wire.conn import RedisPyConn, block_within
from tests.helpers import pool_settings, wait_until


def test_a_wait_is_cut_below_redis_pys_read_timeout_only() -> None:
    assert block_within(Redis(socket_timeout=15), 30.0) == 14.0
    assert block_within(RedisPyConn(Redis(socket_timeout=1)), 3.0) == 0.5
    assert block_within(Redis(socket_timeout=15), 5.0) == 5.0
    assert block_within(Redis(socket_timeout=None), 3600.0) == 3600.0
    assert block_within(Redis(socket_timeout=0.001), 3.0) == 0.01  # 0 ms: 'forever'
    # Any other connection (a Link extends its deadline by the wait): as asked.
    assert block_within(object(), 30.0) == 30.0


@pytest.mark.timeout(60)
async def test_a_wait_longer_than_the_read_timeout_keeps_its_connection(
    redis_url: str, namespace: str
) -> None:
    """The schedulers' wait (a BLPOP of redis-py's, three seconds, on connections that
    time a read out after one) ends by its own timeout: no connection is dropped and
    opened again while the pool is idle (before, one a second)."""
    url = redis_url + ("&" if "?" in redis_url else "?") + "socket_timeout=1"
    # Two shards on one server: their schedulers wait together, with redis-py's BLPOP;
    # the fetchers' shared wait (a Link's) ends every half second: the test's clock.
    settings = pool_settings(url, namespace, shards=2, scheduler_interval=3.0, wake_timeout=0.5)
    pool = WorkerPool(settings=settings)

    @pool.job
    async def nothing() -> None:
        pass

    probe = Redis.from_url(redis_url)

    async def stat(section: str, field: str) -> int:
        return int((await probe.info(section)).get(field, 0))

    async def blpops() -> int:
        stats = await probe.info("commandstats")
        return int(stats.get("cmdstat_blpop", {}).get("calls", 0))

    def waits_ended(n: int, since: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await blpops() - since >= n

        return check

    try:
        async with pool.running():
            await wait_until(waits_ended(4, await blpops()), within=30, every=0.1)
            opened = await stat("stats", "total_connections_received")
            # Eight more of the fetchers' waits: four seconds, a scheduler's wait and more.
            await wait_until(waits_ended(8, await blpops()), within=30, every=0.1)
            assert await stat("stats", "total_connections_received") == opened
    finally:
        await probe.aclose()
