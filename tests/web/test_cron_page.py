"""The cron page: the periodic jobs the live pools fire, their schedule, next run and
last run (a link to the job that run enqueued), merged across pools; /api/cron says the
same. A real pool fires a job every second against a real Redis."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from rota import JobContext, WorkerPool
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(60)


def _pool(redis_url: str, namespace: str, ran: list[str]) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=0.2))

    @pool.periodic("* * * * * *", name="tick")
    async def tick(ctx: JobContext) -> None:
        ran.append(ctx.id)

    @pool.periodic("0 3 * * *", name="nightly", tz="Europe/Paris")
    async def nightly(ctx: JobContext) -> None:
        return None

    return pool


async def test_the_cron_page_shows_next_and_last_runs_of_every_pool(
    http: httpx.AsyncClient, redis_url: str, namespace: str
) -> None:
    assert (await http.get("/api/cron")).json() == {"periodic": []}
    ran: list[str] = []
    first, second = _pool(redis_url, namespace, ran), _pool(redis_url, namespace, ran)
    async with first.running(), second.running():

        async def fired() -> bool:
            rows = (await http.get("/api/cron")).json()["periodic"]
            return any(r["name"] == "tick" and r["last_at"] and len(r["pools"]) == 2 for r in rows)

        await wait_until(fired, within=15, every=0.1)
        rows: list[dict[str, Any]] = (await http.get("/api/cron")).json()["periodic"]
        by_name = {r["name"]: r for r in rows}
        assert set(by_name) == {"tick", "nightly"}
        tick = by_name["tick"]
        assert tick["cron"] == "* * * * * *" and tick["tz"] == "UTC"
        assert tick["next_at"] > tick["last_at"]
        # the last run is a job that was enqueued once, whichever pool claimed it
        await wait_until(lambda: f"cron:tick:{tick['last_at']}" in ran, within=5)
        assert ran.count(f"cron:tick:{tick['last_at']}") == 1
        nightly = by_name["nightly"]
        assert (nightly["tz"], nightly["last_at"]) == ("Europe/Paris", None)
        page = await http.get("/cron")
        assert page.status_code == 200
        assert "nightly" in page.text and "Europe/Paris" in page.text
        # a next run is to come: "in 14h40m", never "-14h40m ago"
        assert re.search(r">in \d+[dhms][^<]*</time>", page.text), page.text
        assert not re.search(r">-[^<]* ago</time>", page.text)
        assert f'href="/jobs/cron:tick:{tick["last_at"]}"' in page.text
