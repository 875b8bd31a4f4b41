"""Turning a periodic job off and on from the cron page and the API: every pool skips the
fire times of a name turned off, the switch is kept in Redis, the audit log records it,
and read-only credentials cannot flip it. Real pools fire a job every second."""

from __future__ import annotations

import anyio
import httpx
import pytest
import redis
from starlette.applications import Starlette

from rota import JobContext, Settings, WorkerPool
from rota.web import Auth, create_app
from rota.worker.rounds import TICK
from tests.helpers import pool_settings, rounds, wait_until
from tests.web.conftest import BASE
from tests.web.live import LiveServer

pytestmark = pytest.mark.timeout(90)

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


def _pool(redis_url: str, namespace: str, ran: list[str]) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=0.2))

    @pool.periodic("* * * * * *", name="tick")
    async def tick(ctx: JobContext) -> None:
        ran.append(ctx.id)

    return pool


async def test_a_periodic_job_turned_off_fires_on_no_pool_until_turned_on(
    http: httpx.AsyncClient, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    ran: list[str] = []
    first, second = _pool(redis_url, namespace, ran), _pool(redis_url, namespace, ran)
    async with first.running(), second.running():
        await wait_until(lambda: len(ran) >= 1, within=10, every=0.05)

        async def listed() -> bool:
            rows = (await http.get("/api/cron")).json()["periodic"]
            return [len(r["pools"]) for r in rows] == [2]

        await wait_until(listed, within=10, every=0.05)
        reply = await http.post("/api/cron/tick/disable")
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"name": "tick", "enabled": False}
        assert redis_sync.hexists("{" + namespace + "}:cronoff", "tick")
        await anyio.sleep(1.2)  # a fire already past its check may still run
        before = len(ran)
        await anyio.sleep(2.5)  # fire times come and go
        for pool in (first, second):
            await rounds(pool, TICK)  # a tick since: the fire times were due
            await rounds(pool)  # and a fetch after it: what it enqueued would be taken
        assert len(ran) == before, ran[before:]
        (row,) = (await http.get("/api/cron")).json()["periodic"]
        assert (row["name"], row["enabled"]) == ("tick", False)
        assert row["off_since"] > 0
        page = (await http.get("/cron", headers=FORM)).text
        assert ">off</span>" in page and 'action="/cron/tick/enable"' in page

        on = await http.post("/cron/tick/enable", headers=FORM, follow_redirects=False)
        assert on.status_code == 303 and "done=cron-on" in on.headers["location"]
        await wait_until(lambda: len(ran) > before, within=5, every=0.05)
        (row,) = (await http.get("/api/cron")).json()["periodic"]
        assert (row["enabled"], row["off_since"]) == (True, None)
        page = (await http.get("/cron", headers=FORM)).text
        assert 'action="/cron/tick/disable"' in page
        assert len(set(ran)) == len(ran)  # each fire time once, across both pools
        await http.post("/cron/tick/disable", headers=FORM)

    # off with no pool left: still listed, so that it can be turned on again
    (row,) = (await http.get("/api/cron")).json()["periodic"]
    assert (row["name"], row["enabled"], row["pools"]) == ("tick", False, [])
    assert (await http.post("/api/cron/nosuch/disable")).status_code == 404
    assert (await http.post("/api/cron/tick/toggle")).status_code == 404
    assert (await http.post("/cron/nosuch/disable", headers=FORM)).status_code == 404
    entries = (await http.get("/api/audit")).json()["entries"]
    paths = [e["path"] for e in entries]
    assert paths[:3] == ["/cron/tick/disable", "/cron/tick/enable", "/api/cron/tick/disable"]


def test_read_only_credentials_cannot_turn_a_periodic_job_off(
    settings: Settings, redis_sync: redis.Redis
) -> None:
    redis_sync.hset("{" + settings.namespace + "}:cronoff", "tick", 1)
    app: Starlette = create_app(settings, auth=Auth(token="tok-a", readonly_token="tok-r"))
    with LiveServer(app) as server:
        look = {"authorization": "Bearer tok-r"}
        for action in ("enable", "disable"):
            refused = httpx.post(f"{server.url}/api/cron/tick/{action}", headers=look)
            assert refused.status_code == 403, refused.text
        assert redis_sync.hexists("{" + settings.namespace + "}:cronoff", "tick")
        act = {"authorization": "Bearer tok-a"}
        assert httpx.post(f"{server.url}/api/cron/tick/enable", headers=act).status_code == 200
        assert not redis_sync.hexists("{" + settings.namespace + "}:cronoff", "tick")
