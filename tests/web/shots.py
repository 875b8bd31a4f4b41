"""The screenshots of docs/images/ (the queue page with its charts, a group, the cron
page), taken in headless Chromium from a private redis-server, a real pool and the real
UI: ``python -m tests.web.shots [directory]`` (``make web-shots``).

The hour of per-minute history behind a name's charts is written into the stats hashes
directly, as the finish script would have left it: a picture of an hour of work should
not take an hour to take. Everything else is made by a pool running real jobs.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import sync_playwright

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.job import now_ms
from rota.testing.embedded import RedisServer
from rota.web import create_app
from tests.helpers import pool_settings, wait_until
from tests.web.conftest import CHROMIUM_ARGS
from tests.web.live import LiveServer

NS = "shop"
OUT = Path(__file__).resolve().parents[2] / "docs" / "images"


def _pool(url: str) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(url, NS, keep_result=3600, heartbeat_interval=1.0))

    @pool.job
    async def resize_image(ctx: JobContext, n: int) -> dict[str, int]:
        await anyio.sleep(random.uniform(0.02, 0.12))
        return {"n": n}

    @pool.job(max_fails=1)
    async def fetch_part(ctx: JobContext, sku: str) -> str:
        await anyio.sleep(0.01)
        if sku.endswith("7") or sku.endswith("13"):
            raise LookupError(f"no stock for {sku}")
        return sku

    @pool.job
    async def pack_order(ctx: JobContext) -> None:
        return None

    @pool.periodic("0 3 * * *", name="nightly_report", tz="Europe/Paris")
    async def nightly_report(ctx: JobContext) -> None:
        return None

    @pool.periodic("*/15 * * * *", name="sync_inventory")
    async def sync_inventory(ctx: JobContext) -> None:
        return None

    @pool.periodic("0 * * * *", name="expire_carts")
    async def expire_carts(ctx: JobContext) -> None:
        return None

    return pool


async def _history(client: Client, name: str) -> None:
    """The last hour of ``name`` per minute, as the finish script keeps it."""
    rng = random.Random(7)
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    pipe = client.admin.shards[0].redis.pipeline(transaction=False)
    for i in range(1, 60):
        t = now - dt.timedelta(minutes=i)
        key = client.admin.shards[0].keys.stats_bucket(t.strftime("%Y%m%d%H%M"))
        done = int(300 + 200 * abs((i % 20) - 10) / 10 + rng.randint(0, 60))
        failed = rng.choice([0, 0, 0, 1, 2, 5]) + (40 if 24 <= i <= 26 else 0)
        mean = 60 + rng.randint(0, 25) + (180 if 24 <= i <= 26 else 0)
        pipe.hincrby(key, f"processed:{name}", done)
        pipe.hincrby(key, f"failed:{name}", failed)
        pipe.hincrby(key, f"ms:{name}", done * mean)
        pipe.expire(key, 7200)
    await pipe.execute()


async def _fill(url: str) -> str:
    """Jobs in every state the pages show (the pool is running); the id of a group with
    two dead members."""
    client = Client.from_url(url, NS)
    await _history(client, "resize_image")
    for i in range(120):
        await client.enqueue("resize_image", n=i)
    group = await client.group(
        [JobSpec(name="fetch_part", kwargs={"sku": f"sku-{i}"}) for i in range(18)],
        then=JobSpec(name="pack_order"),
        group_id="order-4711",
    )

    async def settled() -> bool:
        progress = await client.group_progress(group.id)
        stats = await client.admin.stats()
        return (
            progress.done + progress.failed == 18 and stats.get("processed:resize_image", 0) >= 120
        )

    await wait_until(settled, within=60)
    await client.admin.pause("resize_image")
    for i in range(120, 160):
        await client.enqueue("resize_image", n=i)
    await client.admin.shards[0].redis.hset(
        client.admin.shards[0].keys.cron_off, "expire_carts", now_ms()
    )
    await anyio.sleep(1.5)  # a heartbeat with the schedules
    await client.close()
    return group.id


def main(out: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found: `make chromium` installs it")
    out.mkdir(parents=True, exist_ok=True)
    with RedisServer() as server, start_blocking_portal() as portal:
        running = portal.wrap_async_context_manager(_pool(server.url).running())
        with running:
            group_id = portal.call(_fill, server.url)
            _shoot(chromium, create_app(pool_settings(server.url, NS)), group_id, out)


def _shoot(chromium: str, app: Any, group_id: str, out: Path) -> None:
    with LiveServer(app) as web, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        for shot, path, height in (
            ("queue", "/queues/resize_image", 900),
            ("group", f"/groups/{group_id}", 900),
            ("cron", "/cron", 400),
        ):
            page.set_viewport_size({"width": 1100, "height": height})
            page.goto(web.url + path)
            page.mouse.move(0, 0)
            file = out / f"{shot}.png"
            page.screenshot(path=file, full_page=False)
            sys.stdout.write(f"{file} {file.stat().st_size} bytes\n")
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
