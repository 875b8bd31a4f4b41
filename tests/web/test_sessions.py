"""Login sessions end: each login its own value, an expiry the server enforces, a logout
that ends the session on the server (the old cookie no longer reads or enqueues), and a
new token that ends every session. The cookie used to be HMAC(token, constant): the
same for every login, alive after logout, forever."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest

from rota import Client, Settings
from rota.web import Auth, create_app
from rota.web.security import CSRF_COOKIE, SESSION_COOKIE
from rota.web.sessions import Sessions
from tests.web.conftest import BASE

TOKEN = "tok-sessions-1"


def _client(settings: Settings, client: Client, auth: Auth) -> httpx.AsyncClient:
    app = create_app(settings, client=client, auth=auth)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


@pytest.fixture
async def browser(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(settings, client, Auth(token=TOKEN)) as c:
        yield c


async def _login(c: httpx.AsyncClient) -> str:
    await c.get("/login")
    csrf = c.cookies[CSRF_COOKIE]
    done = await c.post("/login", data={"token": TOKEN, "csrf": csrf, "next": "/"})
    assert done.status_code == 303, done.text
    assert "Max-Age=43200" in done.headers["set-cookie"]
    return c.cookies[SESSION_COOKIE]


def _with(session: str) -> dict[str, str]:
    return {"cookie": f"{SESSION_COOKIE}={session}"}


async def test_each_login_is_its_own_session(browser: httpx.AsyncClient) -> None:
    first = await _login(browser)
    browser.cookies.clear()
    second = await _login(browser)
    assert first != second and TOKEN not in first
    for session in (first, second):
        assert (await browser.get("/api/queues", headers=_with(session))).status_code == 200


async def test_logout_ends_the_session_on_the_server(
    settings: Settings, client: Client, browser: httpx.AsyncClient
) -> None:
    session = await _login(browser)
    other = await _login(browser)  # a second login, in another browser
    csrf = browser.cookies[CSRF_COOKIE]
    browser.cookies.set(SESSION_COOKIE, session)
    assert (await browser.post("/logout", data={"csrf": csrf})).status_code == 303
    async with _client(settings, client, Auth(token=TOKEN)) as fresh:  # another web process
        # the old cookie, replayed: neither a read nor an enqueue
        assert (await fresh.get("/api/queues", headers=_with(session))).status_code == 401
        enqueue = await fresh.post(
            "/api/jobs",
            json={"name": "mail", "args": [1]},
            headers={
                "cookie": f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}={csrf}",
                "x-csrf-token": csrf,
            },
        )
        assert enqueue.status_code == 401
        assert await client.redis.llen(client.keys.queue("mail")) == 0
        # the other login lives on
        assert (await fresh.get("/api/queues", headers=_with(other))).status_code == 200
    ended = await client.redis.zrange(client.keys.web_sessions_ended, 0, -1)
    assert ended == [session.split(".")[0].encode()]
    assert 0 < await client.redis.pttl(client.keys.web_sessions_ended) <= 43_260_000


async def test_an_expired_session_is_refused_whatever_the_browser_kept(
    settings: Settings, client: Client, browser: httpx.AsyncClient
) -> None:
    sessions = Sessions(TOKEN, 43200.0, client)
    old = sessions.issue(now=time.time() - 43201)
    assert (await browser.get("/api/queues", headers=_with(old))).status_code == 401
    young = sessions.issue(now=time.time() - 43000)
    assert (await browser.get("/api/queues", headers=_with(young))).status_code == 200
    short = Auth(token=TOKEN, session_ttl=60)
    async with _client(settings, client, short) as c:
        assert (await c.get("/api/queues", headers=_with(young))).status_code == 401


async def test_a_new_token_ends_every_session(
    settings: Settings, client: Client, browser: httpx.AsyncClient
) -> None:
    session = await _login(browser)
    async with _client(settings, client, Auth(token="tok-sessions-2")) as rotated:
        assert (await rotated.get("/api/queues", headers=_with(session))).status_code == 401


@pytest.mark.parametrize(
    "forged",
    ["", "x", "a.b.c", "0123.99999999999.deadbeef", "..", "id.12.", "id.-1.ab"],
)
async def test_a_forged_cookie_opens_nothing(browser: httpx.AsyncClient, forged: str) -> None:
    assert (await browser.get("/api/queues", headers=_with(forged))).status_code == 401
