"""Failed logins are throttled per client address; cookies are Secure over HTTPS.

The app runs behind Starlette's ASGI transport here (the client address and scheme are
what uvicorn would put in the scope); tests/web/test_secrets.py checks the same through
a real ``rota web`` behind a proxy header.
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from rota import Client, Settings
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.throttle import Throttle
from tests.web.live import LiveServer

BEARER = {"authorization": "Bearer tok-123"}
WRONG = {"authorization": "Bearer guess"}


def _client(app: object, address: str, base: str = "http://127.0.0.1:5040") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 4321))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=base)


@pytest.fixture
def app(settings: Settings, client: Client) -> object:
    return create_app(settings, client=client, auth=Auth(token="tok-123"))


async def test_the_fifth_wrong_token_makes_the_address_wait(app: object) -> None:
    async with _client(app, "10.0.0.7") as guesser, _client(app, "10.0.0.8") as other:
        for _ in range(5):
            assert (await guesser.get("/api/queues", headers=WRONG)).status_code == 401
        blocked = await guesser.get("/api/queues", headers=WRONG)
        assert blocked.status_code == 429
        assert 1 <= int(blocked.headers["retry-after"]) <= 300
        # while it waits, even the right token is not looked at; a login form neither
        assert (await guesser.get("/api/queues", headers=BEARER)).status_code == 429
        form = await guesser.post(
            "/login",
            data={"token": "tok-123", "next": "/"},
            headers={"origin": "http://127.0.0.1:5040"},
        )
        assert form.status_code == 429
        # another address is not held up; a request without credentials is not either
        assert (await other.get("/api/queues", headers=BEARER)).status_code == 200
        assert (await guesser.get("/healthz")).status_code == 200


async def test_the_login_form_counts_and_a_success_resets(app: object) -> None:
    origin = {"origin": "http://127.0.0.1:5040"}
    async with _client(app, "10.0.0.9") as c:
        for _ in range(4):
            bad = await c.post("/login", data={"token": "nope", "next": "/"}, headers=origin)
            assert bad.status_code == 401
        good = await c.post("/login", data={"token": "tok-123", "next": "/"}, headers=origin)
        assert good.status_code == 303
    async with _client(app, "10.0.0.9") as c:  # the same address, without the cookie
        for _ in range(4):  # counted from zero again: no wait yet
            assert (await c.get("/api/queues", headers=WRONG)).status_code == 401


async def test_the_session_cookie_is_secure_over_https_only(app: object) -> None:
    origin = {"origin": "https://127.0.0.1:5040"}
    async with _client(app, "10.0.0.10", base="https://127.0.0.1:5040") as c:
        done = await c.post("/login", data={"token": "tok-123", "next": "/"}, headers=origin)
        assert done.status_code == 303
        cookies = done.headers.get_list("set-cookie")
        session = [h for h in cookies if h.startswith(SESSION_COOKIE + "=")]
        assert session and all("Secure" in h for h in cookies), cookies
    origin = {"origin": "http://127.0.0.1:5040"}
    async with _client(app, "10.0.0.11") as c:
        done = await c.post("/login", data={"token": "tok-123", "next": "/"}, headers=origin)
        assert done.status_code == 303
        assert not any("Secure" in h for h in done.headers.get_list("set-cookie"))


async def test_an_open_path_clears_nothing_and_a_wrong_header_there_counts(app: object) -> None:
    """4 wrong guesses, then a request with a header to an open path that answers 200,
    repeated: that used to clear the count, so every guess was evaluated."""
    answers: list[int] = []
    async with _client(app, "10.0.0.12") as guesser:
        for _ in range(5):
            for _ in range(4):
                answers.append((await guesser.get("/api/queues", headers=WRONG)).status_code)
            await guesser.get("/healthz", headers=WRONG)
            await guesser.get("/login", headers=BEARER)  # a right header on an open path
    assert answers[:4] == [401] * 4 and 429 in answers, answers


async def test_login_forms_sent_together_are_counted_before_they_are_evaluated(
    settings: Settings, client: Client
) -> None:
    """Many login forms opened at once on real connections, their headers sent first and
    their bodies only after: each is counted when it arrives, so no more than the free
    tries are evaluated; the rest wait (429)."""
    app = create_app(settings, client=client, auth=Auth(token="tok-123"))
    body = b"token=nope&next=%2F"
    with LiveServer(app) as live:
        host, port = live.url.removeprefix("http://").split(":")
        streams = [await anyio.connect_tcp(host, int(port)) for _ in range(20)]
        head = (
            "POST /login HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\nOrigin: {live.url}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        for s in streams:
            await s.send(head)
        await anyio.sleep(0.3)  # every request has arrived; no body yet
        for s in streams:
            await s.send(body)
        statuses = []
        for s in streams:
            reply = b""
            with anyio.fail_after(10):
                while b"\r\n" not in reply:
                    reply += await s.receive()
            statuses.append(int(reply.split(b" ", 2)[1]))
            await s.aclose()
    assert statuses.count(401) <= Throttle.FREE + 1, statuses
    assert statuses.count(429) >= 20 - Throttle.FREE - 1, statuses


async def test_every_failed_login_is_logged_without_its_secret(app: object) -> None:
    with capture_logs() as logs:
        async with _client(app, "10.0.0.13") as c:
            await c.get("/api/queues", headers=WRONG)
            await c.post(
                "/login",
                data={"token": "secret-guess", "next": "/"},
                headers={"origin": "http://127.0.0.1:5040"},
            )
    failed = [e for e in logs if e["event"] == "failed login"]
    assert [e["by"] for e in failed] == ["authorization", "form"]
    assert all(e["address"] == "10.0.0.13" for e in failed)
    assert "guess" not in repr(failed)
