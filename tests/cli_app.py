"""A pool for the CLI and daemon tests: ``rota worker tests.cli_app:pool``."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import anyio

import rota

pool = rota.WorkerPool(concurrency=5)


@pool.job(max_fails=1)
async def nap(ctx: rota.JobContext, seconds: float = 0.0) -> str:
    await ctx.checkin(f"napping {seconds}s")
    await anyio.sleep(seconds)
    return ctx.id


@pool.job(max_fails=1)
async def fail(ctx: rota.JobContext, why: str = "broken") -> None:
    raise RuntimeError(why)


@pool.job(max_fails=1)
def hold(path: str) -> None:
    """A plain ``def`` handler: its thread runs until the file ``path`` exists."""
    while not Path(path).exists():
        time.sleep(0.02)


#: A pool whose lifespan fails before it starts, as a program's own setup can.
broken = rota.WorkerPool(concurrency=1)
broken.job(nap)


@broken.lifespan
async def _model() -> AsyncGenerator[Mapping[str, Any], None]:
    with open("/nonexistent/rota-model.bin", "rb"):  # noqa: ASYNC230 - it fails at once
        yield {}


#: A pool whose lifespan opens the application's own Redis (``APP_REDIS_URL``), which
#: is not there: the application's error, not rota's connection.
own_redis = rota.WorkerPool(concurrency=1)
own_redis.job(nap)


@own_redis.lifespan
async def _app_redis() -> AsyncGenerator[Mapping[str, Any], None]:
    import redis.asyncio

    app = redis.asyncio.Redis.from_url(os.environ["APP_REDIS_URL"])
    try:
        await app.ping()
        yield {"app": app}
    finally:
        await app.aclose()


#: The same, with the application's Redis opened when the pool stops.
own_redis_at_stop = rota.WorkerPool(concurrency=1)
own_redis_at_stop.job(nap)


@own_redis_at_stop.lifespan
async def _app_redis_at_stop() -> AsyncGenerator[Mapping[str, Any], None]:
    import redis.asyncio

    yield {}
    app = redis.asyncio.Redis.from_url(os.environ["APP_REDIS_URL"])
    try:
        await app.set("flushed", "1")
    finally:
        await app.aclose()
