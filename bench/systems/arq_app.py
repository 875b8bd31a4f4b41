"""arq: ``arq bench.systems.arq_app.WorkerSettings`` (``max_jobs`` = concurrency).

The producer uses ``arq.connections.create_pool`` and ``enqueue_job``; arq has no batch
enqueue. The event loop is uvloop, as for every system in the benchmark.
"""

from __future__ import annotations

from typing import Any

import uvloop
from arq.connections import ArqRedis, RedisSettings, create_pool

from bench.systems.common import concurrency, noop_body, redis_url, sleep_body

uvloop.install()


async def noop(ctx: dict[str, Any], t: float) -> None:
    noop_body("noop", t)


async def sleep(ctx: dict[str, Any], t: float) -> None:
    await sleep_body("sleep", t)


class WorkerSettings:
    functions = [noop, sleep]  # noqa: RUF012 - arq reads these class attributes
    redis_settings = RedisSettings.from_dsn(redis_url())
    max_jobs = concurrency()


class Producer:
    batch_api = None  # arq has no batch enqueue

    def __init__(self, url: str) -> None:
        self.url = url
        self.pool: ArqRedis | None = None

    async def open(self) -> None:
        self.pool = await create_pool(RedisSettings.from_dsn(self.url))

    async def one(self, job: str, t: float) -> None:
        assert self.pool is not None
        await self.pool.enqueue_job(job, t)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
