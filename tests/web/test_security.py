"""Authentication, cross-site request refusal, headers, escaping and the Host check."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator

import httpx
import pytest
import redis

from rota import Client, Settings
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.web.conftest import BASE
from tests.web.live import IMG, SCRIPT, Seeded
from tests.web.test_api import snapshot

HTML = {"accept": "text/html"}


def _client(app: object, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url=BASE,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def basic(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client=client, auth=Auth(basic=("ada", "s3cret:x")))
    async with _client(app) as c:
        yield c


@pytest.fixture
async def tokened(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client=client, auth=Auth(token="tok-123"))
    async with _client(app) as c:
        yield c


def _basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def test_security_headers(http: httpx.AsyncClient) -> None:
    for path in ("/", "/api/queues", "/static/rota.css", "/nothing", "/metrics"):
        h = (await http.get(path, headers=HTML)).headers
        csp = h["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert h["x-content-type-options"] == "nosniff"
        assert h["referrer-policy"] == "same-origin"
        assert "server" not in h


async def test_pages_have_no_inline_script(http: httpx.AsyncClient, seeded: Seeded) -> None:
    for path in ("/", "/queues", "/pools", "/busy", "/dead", "/retry", "/scheduled", "/redis"):
        html = (await http.get(path, headers=HTML)).text
        scripts = re.findall(r"<script[^>]*>", html)
        assert scripts == ['<script src="/static/rota.js?v=0.1.0" defer>'], (path, scripts)
        assert not re.search(r"<[^>]*\son[a-z]+=", html), path  # no inline event handlers
        assert "//cdn" not in html and "https://" not in html


async def test_args_and_errors_are_escaped(http: httpx.AsyncClient, seeded: Seeded) -> None:
    for path in ("/dead", f"/jobs/{seeded.script}", f"/dead?q={seeded.script}"):
        html = (await http.get(path, headers=HTML)).text
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert SCRIPT and IMG  # the payloads the example jobs carry


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "http://127.0.0.1:9999"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site", "origin": "http://127.0.0.1:5040"},
    ],
)
async def test_cross_site_posts_are_refused(
    http: httpx.AsyncClient,
    client: Client,
    redis_sync: redis.Redis,
    namespace: str,
    headers: dict[str, str],
) -> None:
    await client.enqueue("mail", 1)
    before = snapshot(redis_sync, namespace)
    for path in ("/api/queues/mail/pause", "/queues/mail/clear"):
        response = await http.post(path, headers=headers)
        assert response.status_code == 403
        assert response.json() == {"error": "cross-site request refused"}
    page = await http.post("/queues/mail/pause", headers={**headers, **HTML})
    assert page.status_code == 403 and "cross-site request refused" in page.text
    assert snapshot(redis_sync, namespace) == before


async def test_same_origin_and_api_posts_pass(http: httpx.AsyncClient, client: Client) -> None:
    await client.enqueue("mail", 1)
    same = {"origin": BASE, "sec-fetch-site": "same-origin"}
    assert (await http.post("/api/queues/mail/pause", headers=same)).status_code == 200
    assert (await http.post("/api/queues/mail/resume", headers={"origin": BASE})).status_code == 200
    # no Origin, no Sec-Fetch-Site, no auth configured: a plain API client
    assert (await http.post("/api/queues/mail/pause")).status_code == 200
    response = await http.post("/queues/mail/resume", data={"next": "/queues"}, headers=same)
    assert response.status_code == 303
    assert response.headers["location"] == "/queues?done=resumed"
    assert not (await client.admin.queues())[0].paused


async def test_basic_auth(basic: httpx.AsyncClient, client: Client) -> None:
    await client.enqueue("mail", 1)
    for path in ("/", "/api/queues", "/metrics", "/jobs/x", "/api/openapi.json"):
        response = await basic.get(path)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Basic ")
    assert (await basic.get("/", headers=HTML)).status_code == 401
    assert (await basic.get("/", headers=_basic("ada", "wrong"))).status_code == 401
    assert (await basic.get("/", headers=_basic("bob", "s3cret:x"))).status_code == 401
    assert (await basic.get("/", headers={"authorization": "Basic !!!"})).status_code == 401
    assert (await basic.get("/", headers=_basic("ada", "s3cret:x"))).status_code == 200
    assert (await basic.get("/healthz")).status_code == 200
    assert (await basic.get("/static/rota.js")).status_code == 200
    # an API client with credentials and without Origin may POST
    ok = await basic.post("/api/queues/mail/pause", headers=_basic("ada", "s3cret:x"))
    assert ok.status_code == 200
    assert (await basic.post("/api/queues/mail/resume")).status_code == 401
    assert (await client.admin.queues())[0].paused


async def test_token_bearer_and_login_cookie(
    tokened: httpx.AsyncClient, client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    await client.enqueue("mail", 1)
    assert (await tokened.get("/api/queues")).status_code == 401
    page = await tokened.get("/queues", headers=HTML)
    assert page.status_code == 401 and 'name="token"' in page.text
    bearer = {"authorization": "Bearer tok-123"}
    assert (await tokened.get("/api/queues", headers=bearer)).status_code == 200
    wrong = {"authorization": "Bearer tok-124"}
    assert (await tokened.get("/api/queues", headers=wrong)).status_code == 401
    assert (await tokened.post("/api/queues/mail/pause", headers=bearer)).status_code == 200

    # the login form: GET sets the CSRF cookie, POST checks it and the token
    login = await tokened.get("/login", headers=HTML)
    csrf = tokened.cookies[CSRF_COOKIE]
    assert f'value="{csrf}"' in login.text
    bad = await tokened.post("/login", data={"token": "nope", "csrf": csrf, "next": "/queues"})
    assert bad.status_code == 401 and SESSION_COOKIE not in tokened.cookies
    no_csrf = await tokened.post("/login", data={"token": "tok-123", "next": "/queues"})
    assert no_csrf.status_code == 403
    done = await tokened.post("/login", data={"token": "tok-123", "csrf": csrf, "next": "/queues"})
    assert (done.status_code, done.headers["location"]) == (303, "/queues")
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    session = tokened.cookies[SESSION_COOKIE]
    assert "tok-123" not in session
    assert (await tokened.get("/queues", headers=HTML)).status_code == 200

    # with the cookie only and no Origin, a POST needs the CSRF token
    before = snapshot(redis_sync, namespace)
    refused = await tokened.post("/queues/mail/resume", data={"next": "/queues"})
    assert refused.status_code == 403
    forged = await tokened.post("/queues/mail/resume", data={"csrf": "x" * 43})
    assert forged.status_code == 403
    assert snapshot(redis_sync, namespace) == before
    ok = await tokened.post("/queues/mail/resume", data={"csrf": csrf, "next": "/queues"})
    assert ok.status_code == 303
    ok = await tokened.post("/api/queues/mail/pause", headers={"x-csrf-token": csrf})
    assert ok.status_code == 200

    out = await tokened.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303
    assert (await tokened.get("/queues", headers=HTML)).status_code == 401


async def test_login_never_redirects_elsewhere(tokened: httpx.AsyncClient) -> None:
    await tokened.get("/login")
    csrf = tokened.cookies[CSRF_COOKIE]
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:1"):
        done = await tokened.post("/login", data={"token": "tok-123", "csrf": csrf, "next": target})
        assert done.headers["location"] == "/"


async def test_loopback_server_answers_loopback_names_only(
    settings: Settings, client: Client
) -> None:
    app = create_app(settings, client=client, allowed_hosts=frozenset({"127.0.0.1", "localhost"}))
    async with _client(app) as c:
        assert (await c.get("/api/queues")).status_code == 200
        assert (await c.get("/api/queues", headers={"host": "localhost:5040"})).status_code == 200
        rebound = await c.get("/api/queues", headers={"host": "evil.example:5040"})
        assert rebound.status_code == 400


async def test_a_metrics_token_opens_the_metrics_and_nothing_else(
    settings: Settings, client: Client
) -> None:
    app = create_app(settings, client=client, auth=Auth(token="ui-tok", metrics_token="m-tok"))
    scrape = {"authorization": "Bearer m-tok", "accept": "text/plain"}
    async with _client(app) as c:
        for _ in range(8):  # a scrape is a success: it never trips the login throttle
            answer = await c.get("/metrics", headers=scrape)
            assert answer.status_code == 200 and "rota_" in answer.text
        assert (await c.get("/api/queues", headers=scrape)).status_code == 401
        assert (await c.get("/queues", headers={**scrape, **HTML})).status_code == 401
        posted = await c.post("/api/queues/mail/pause", headers=scrape)
        assert posted.status_code == 401
        wrong = {"authorization": "Bearer m-tok2"}
        assert (await c.get("/metrics", headers=wrong)).status_code == 401
        ui = {"authorization": "Bearer ui-tok"}
        assert (await c.get("/metrics", headers=ui)).status_code == 200  # the UI's opens it too
