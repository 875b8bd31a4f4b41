"""A pool for the CLI and daemon tests: ``rota worker tests.cli_app:pool``."""

from __future__ import annotations

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
