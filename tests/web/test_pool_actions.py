"""Quiet, stop and resume a live pool, or every pool of a host, from the API and the pools
page's forms: the pool obeys, /api/pools and the page show its state, the audit log
records each change, and cross-site requests and read-only credentials change nothing."""

from __future__ import annotations

import contextlib
import html
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx
import msgspec
import pytest
import redis
from starlette.applications import Starlette

from rota import Client, JobContext, Settings, WorkerPool
from rota.protocol.snapshot import PoolSnapshot
from rota.web import Auth, create_app
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.helpers import pool_settings, wait_until
from tests.web.conftest import BASE

pytestmark = pytest.mark.timeout(90)

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


class Running:
    """A pool running in the background whose ``hold`` jobs wait for ``release``."""

    def __init__(self, redis_url: str, namespace: str, **changes: object) -> None:
        # A beat of 0.5 s: a pool is live for three beats, and on a loaded host a pool
        # beating every 0.1 s went unseen for 0.3 s (a command to it then found no pool).
        self.pool = WorkerPool(
            settings=pool_settings(redis_url, namespace, heartbeat_interval=0.5, **changes)
        )
        self.release = anyio.Event()
        self.ended = anyio.Event()
        self.started: list[str] = []
        self.id = ""

        @self.pool.job
        async def hold(ctx: JobContext) -> None:
            self.started.append(ctx.id)
            await self.release.wait()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Running]:
        leave = anyio.Event()
        up = anyio.Event()

        async def run() -> None:
            async with self.pool.running() as rt:
                self.id = rt.pool_id
                up.set()
                await leave.wait()
            self.ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await up.wait()
            try:
                yield self
            finally:
                self.release.set()
                leave.set()


async def pool_row(http: httpx.AsyncClient, pool_id: str) -> dict[str, Any] | None:
    rows = (await http.get("/api/pools")).json()["pools"]
    return next((r for r in rows if r["id"] == pool_id), None)


def shows(
    http: httpx.AsyncClient, pool_id: str, state: str | None, told: str | None = None
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        row = await pool_row(http, pool_id)
        if state is None:
            return row is None
        return row is not None and (row["state"], row["told"]) == (state, told)

    return check


async def test_quiet_resume_and_stop_from_the_api_and_the_page(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    pooled = Running(redis_url, namespace, grace=30.0)
    with anyio.fail_after(60):
        async with pooled.running() as p:
            host = (await pool_row(http, p.id) or {})["host"]
            reply = await http.post(f"/api/pools/{p.id}/quiet")
            assert reply.status_code == 200, reply.text
            assert reply.json() == {"command": "quiet", "pools": [p.id]}
            await wait_until(shows(http, p.id, "quiet", "quiet"))
            page = (await http.get("/pools", headers=FORM)).text
            assert f'data-pool="{p.id}"' in page and ">quiet</span>" in page
            assert 'action="/pools/' in page and '/resume"' in page

            form = {"next": "/pools"}
            done = await http.post(
                f"/pools/{p.id}/resume", headers=FORM, data=form, follow_redirects=False
            )
            assert done.status_code == 303 and "done=pools-resume" in done.headers["location"]
            await wait_until(shows(http, p.id, "running"))
            notice = await http.get(done.headers["location"], headers=FORM)
            assert "1 pools told to fetch again." in notice.text

            # a job that runs until released: the stopping pool waits for it
            await client.enqueue("hold")
            await wait_until(lambda: len(p.started) == 1)
            stop = await http.post(f"/api/hosts/{host}/stop")
            assert stop.json() == {"command": "stop", "pools": [p.id]}
            await wait_until(shows(http, p.id, "stopping", "stop"))
            page = (await http.get("/pools", headers=FORM)).text
            assert ">stopping</span>" in page
            for command in ("quiet", "resume"):
                refused = await http.post(f"/api/pools/{p.id}/{command}")
                assert refused.status_code == 409, refused.text
                assert "a stop cannot be taken back" in refused.json()["error"]
            p.release.set()
            await p.ended.wait()  # the pool drained and left
            await wait_until(shows(http, p.id, None))

    for path in ("/api/pools/nosuch/quiet", "/api/hosts/nohost/stop", "/api/pools/x/pause"):
        assert (await http.post(path)).status_code in (404, 405), path
    missing = await http.post("/api/hosts/nohost/quiet")
    assert missing.json() == {"error": "no live pool on host nohost"}
    entries = (await http.get("/api/audit")).json()["entries"]
    done_paths = [(e["path"], e.get("count")) for e in entries if e["status"] < 400]
    assert done_paths[:3] == [
        (f"/api/hosts/{host}/stop", 1),
        (f"/pools/{p.id}/resume", 1),
        (f"/api/pools/{p.id}/quiet", 1),
    ]


async def test_cross_site_and_read_only_requests_change_nothing(
    settings: Settings, client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    app: Starlette = create_app(
        settings, client=client, auth=Auth(token="tok-a", readonly_token="tok-r")
    )
    transport = httpx.ASGITransport(app=app)
    key = "{" + namespace + "}:poolcmds"
    with anyio.fail_after(60):
        async with (
            Running(redis_url, namespace).running() as p,
            httpx.AsyncClient(transport=transport, base_url=BASE) as web,
        ):
            look = {"authorization": "Bearer tok-r"}
            rows = (await web.get("/api/pools", headers=look)).json()["pools"]
            host = next(r["host"] for r in rows if r["id"] == p.id)
            for path in (f"/api/pools/{p.id}/stop", f"/api/hosts/{host}/quiet"):
                refused = await web.post(path, headers=look)
                assert refused.status_code == 403, refused.text
            # a login session: a form without the CSRF token, or from another site, is refused
            await web.get("/login", headers={"accept": "text/html"})
            csrf = web.cookies[CSRF_COOKIE]
            login = await web.post("/login", data={"token": "tok-a", "csrf": csrf, "next": "/"})
            assert login.status_code == 303
            form = f"/pools/{p.id}/stop"
            assert (await web.post(form, data={"next": "/pools"})).status_code == 403
            cross = {"origin": "https://evil.example", "sec-fetch-site": "cross-site"}
            forged = await web.post(form, headers=cross, data={"csrf": csrf})
            assert forged.status_code == 403
            assert redis_sync.hlen(key) == 0
            fields = {"csrf": csrf, "next": "/pools"}
            ok = await web.post(f"/pools/{p.id}/quiet", data=fields, follow_redirects=False)
            assert ok.status_code == 303, ok.text
            assert redis_sync.hgetall(key) == {p.id.encode(): b"quiet"}
            assert not p.ended.is_set()  # the refused stops stopped nothing


async def test_hostile_text_in_a_snapshot_is_escaped_and_reaches_no_other_action(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    """A snapshot written by hand (another language's pool, or an attacker with Redis)
    whose host and id hold markup and path segments: shown as text, and its forms post
    to the pool's and the host's own actions only."""
    host = "<img src=x onerror=alert(1)>/../../queues/mail"
    pool_id = 'x"/../../queues/mail'
    snap = PoolSnapshot(
        id=pool_id,
        host=host,
        pid=1,
        version="1",
        namespace=namespace,
        concurrency=1,
        jobs=["<b>mail</b>"],
        started_at=int(time.time() * 1000),
        heartbeat_at=int(time.time() * 1000),
        heartbeat_interval=60.0,
        state="<script>alert(2)</script>",
    )
    p = "{" + namespace + "}:"
    redis_sync.set(p + "pool:" + pool_id, msgspec.json.encode(snap), ex=60)
    redis_sync.zadd(p + "pools", {pool_id: int(time.time() * 1000)})
    page = (await http.get("/pools", headers=FORM)).text
    for raw in ("<img src=x", "<script>alert(2)", "<b>mail</b>", 'x"/'):
        assert raw not in page, raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    actions = re.findall(r'action="([^"]*)"', page)
    assert actions, page
    for action in actions:
        assert action.startswith(("/pools/", "/hosts/")), action
        assert action.count("/") == 3, action  # the id or host is one segment
    # a "/" in an id or a host stays in its segment: such a pool cannot be told through
    # the page (a 404: rota's ids and hostnames hold none), and nothing else is reached
    await client.admin.pause("mail")
    for action in actions:
        done = await http.post(html.unescape(action), headers=FORM, data={"next": "/pools"})
        assert done.status_code == 404, (action, done.status_code)
    assert await client.admin.commands.read() == {}
    (mail,) = await client.admin.queues(["mail"])
    assert mail.paused
