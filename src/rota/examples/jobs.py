"""Example jobs: what ``rota demo`` runs, and a starting point for your own.

Run them with ``rota worker rota.examples.jobs:pool`` and enqueue with
``rota enqueue send_email to=ada@example.com subject=hello``.
"""

from __future__ import annotations

import random
import time
from typing import Any

import anyio

import rota

pool = rota.WorkerPool(concurrency=20)


@pool.job(priority=4, max_fails=3, timeout=10)
async def send_email(ctx: rota.JobContext, to: str, subject: str) -> dict[str, str]:
    """A quick job: most of the traffic."""
    await anyio.sleep(random.uniform(0.01, 0.1))
    ctx.logger.info("email sent", to=to)
    return {"to": to, "status": "sent"}


@pool.job(priority=2, max_concurrency=3)
def resize_image(path: str, width: int) -> str:
    """A plain function: runs in a worker thread; at most 3 at once across all pools."""
    time.sleep(random.uniform(0.05, 0.3))
    return f"{path}@{width}w"


@pool.job(max_fails=4, backoff=lambda n: 2.0 * n)
async def flaky_webhook(ctx: rota.JobContext, url: str) -> None:
    """Fails half the time: retried with backoff, dead after 4 failures."""
    await anyio.sleep(0.05)
    if random.random() < 0.5:
        raise ConnectionError(f"{url} answered 503")


@pool.job(timeout=30)
async def nightly_report(ctx: rota.JobContext, day: str) -> dict[str, Any]:
    """A slow job that reports progress and checks in, and stops early on shutdown."""
    steps = 10
    for step in range(steps):
        await ctx.progress(100 * step / steps, f"section {step + 1} of {steps}")
        if await ctx.checkin(f"section {step + 1}"):
            raise rota.Retry(delay=1, message="pool shutting down: continue later")
        await anyio.sleep(random.uniform(0.2, 0.5))
    await ctx.job_log(f"report for {day} written")
    return {"day": day, "rows": random.randint(100, 1000)}


@pool.job(max_fails=1)
async def always_fails(ctx: rota.JobContext, reason: str) -> None:
    """Dies at once: look for it among the dead jobs."""
    raise ValueError(reason)


def sample() -> tuple[str, dict[str, Any]]:
    """One example job to enqueue, drawn like real traffic."""
    roll = random.random()
    n = random.randint(1, 10_000)
    if roll < 0.6:
        return "send_email", {"to": f"user{n}@example.com", "subject": f"Order #{n}"}
    if roll < 0.8:
        return "resize_image", {"path": f"/images/{n}.jpg", "width": random.choice([320, 640])}
    if roll < 0.93:
        return "flaky_webhook", {"url": f"https://hooks.example.com/{n}"}
    if roll < 0.98:
        return "nightly_report", {"day": f"2026-01-{n % 28 + 1:02d}"}
    return "always_fails", {"reason": f"bad record {n}"}
