"""A pool for the CLI and daemon tests: ``rota worker tests.cli_app:pool``."""

from __future__ import annotations

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
