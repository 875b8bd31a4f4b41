"""``rota demo``: the example pool, a trickle of example jobs, on an embedded Redis,
and the web UI (http://127.0.0.1:5040, or a free port when that one is taken).

It needs nothing but Python: when no Redis URL is given it starts a private
redis-server on a Unix socket in a temporary directory, and removes both on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from rota.client import Client
from rota.config import Settings
from rota.daemon import backend_options, load_pool
from rota.errors import RedisRefused
from rota.testing.embedded import embedded_redis
from rota.urls import redacted
from rota.web.server import serving
from rota.worker.pool import WorkerPool

__all__ = ["REMIND_EVERY", "banner", "load_demo", "remind", "run_demo"]

log = structlog.get_logger("rota.demo")


def load_demo(app: str) -> tuple[WorkerPool, Callable[[], tuple[str, dict[str, Any]]]]:
    """The pool ``app`` names, and the ``sample()`` of its module that draws example jobs."""
    pool = load_pool(app)
    module = app.partition(":")[0]
    sample = getattr(importlib.import_module(module), "sample", None)
    if sample is None:
        raise ValueError(f"{module} has no sample() giving example jobs")
    return pool, sample


def run_demo(
    pool: WorkerPool,
    sample: Callable[[], tuple[str, dict[str, Any]]],
    settings: Settings,
    *,
    rate: float,
    embedded: bool,
) -> None:
    """Run until SIGINT/SIGTERM, then drain and clean up."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(embedded_redis()) if embedded else settings.redis_url
        settings = settings.replace(redis_url=url, grace=min(settings.grace, 5.0))
        pool.configure(settings)
        anyio.run(_demo, pool, settings, sample, rate, backend_options=backend_options())


async def _demo(
    pool: WorkerPool,
    settings: Settings,
    sample: Callable[[], tuple[str, dict[str, Any]]],
    rate: float,
) -> None:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, stop)
        async with Client.from_settings(settings) as client:
            log.info(
                "demo started",
                redis_url=redacted(settings.redis_url),
                namespace=settings.namespace,
                rate=rate,
            )
            async with pool.running(), serving(settings) as url:
                log.info("web UI", url=url)
                sys.stderr.write(banner(url))
                sys.stderr.flush()
                tg.start_soon(_trickle, client, sample, rate)
                tg.start_soon(remind, client, url, REMIND_EVERY)
                await stop.wait()
        tg.cancel_scope.cancel()
    log.info("demo stopped")


#: Seconds between the demo's reminders of where the web UI is and how to stop.
REMIND_EVERY = 15.0


def banner(url: str) -> str:
    """The box the demo shows once its web UI answers: where to look, how to stop."""
    lines = ["rota demo is running", "", f"web UI   {url}", "stop     Ctrl-C"]
    width = max(map(len, lines)) + 2
    rule = "+" + "-" * width + "+"
    body = [f"| {line.ljust(width - 2)} |" for line in lines]
    return "\n".join(["", rule, *body, rule, ""]) + "\n"


async def remind(client: Client, url: str, every: float) -> None:
    """Every ``every`` seconds, one line that says where the web UI is and how to stop,
    with the jobs done so far: the job lines scroll the banner away."""
    while True:
        await anyio.sleep(every)
        try:
            done = (await client.admin.stats()).get("processed", 0)
        except Exception:  # a reminder never stops the demo
            done = -1
        log.info("demo running: open the web UI, Ctrl-C stops", web_ui=url, processed=done)


async def _trickle(
    client: Client, sample: Callable[[], tuple[str, dict[str, Any]]], rate: float
) -> None:
    """Enqueue example jobs at about ``rate`` a second, a few of them scheduled. While
    Redis refuses them (full, a replica), the demo says so once and tries again later."""
    refused = False
    while True:
        name, kwargs = sample()
        try:
            if random.random() < 0.1:
                await client.enqueue_in(random.uniform(1, 30), name, **kwargs)
            else:
                await client.enqueue(name, **kwargs)
        except RedisRefused as exc:
            if not refused:
                log.warning("demo enqueues refused: trying again every second", error=str(exc))
            refused = True
            await anyio.sleep(1)
            continue
        if refused:
            log.info("demo enqueues go through again")
            refused = False
        await anyio.sleep(random.expovariate(rate) if rate > 0 else 3600)


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
