"""The failed-login throttle against whoever holds a weaker credential: right read-only
or metrics requests, read-only logins and session cookies, sent between wrong guesses of
the admin token from the same address, leave the count as it is, so the throttle engages
after the documented number of failures; only the admin credentials, right, clear it.

The app runs behind Starlette's ASGI transport (the client address is what uvicorn would
put in the scope); Redis is real.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable

import httpx
import pytest

from rota import Client, Settings
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.throttle import Throttle

ADMIN, READONLY, METRICS = "tok-admin-1", "tok-look-1", "tok-scrape-1"
BASIC = ("ops", "pw-1")
ORIGIN = {"origin": "http://127.0.0.1:5040"}
GUESS = {"authorization": "Bearer guess"}

Right = Callable[[httpx.AsyncClient, dict[str, str]], Awaitable[int]]


def _client(app: object, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 4321))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040")


async def _login(app: object, token: str) -> str:
    """A session cookie of a login with ``token``, from an address of its own."""
    async with _client(app, "10.9.9.9") as c:
        done = await c.post("/login", data={"token": token, "next": "/"}, headers=ORIGIN)
        assert done.status_code == 303, done.text
        return done.cookies[SESSION_COOKIE]


def _bearer(token: str, path: str = "/api/queues") -> Right:
    async def right(c: httpx.AsyncClient, _: dict[str, str]) -> int:
        return (await c.get(path, headers={"authorization": f"Bearer {token}"})).status_code

    return right


async def _basic(c: httpx.AsyncClient, _: dict[str, str]) -> int:
    pair = base64.b64encode(":".join(BASIC).encode()).decode()
    return (await c.get("/api/queues", headers={"authorization": f"Basic {pair}"})).status_code


def _form(token: str) -> Right:
    async def right(c: httpx.AsyncClient, _: dict[str, str]) -> int:
        form = {"token": token, "next": "/"}
        answer = await c.post("/login", data=form, headers=ORIGIN)
        c.cookies.clear()  # the guesses go without the session it opened
        return answer.status_code

    return right


async def _cookie(c: httpx.AsyncClient, cookies: dict[str, str]) -> int:
    headers = {"cookie": f"{SESSION_COOKIE}={cookies['session']}"}
    return (await c.get("/api/queues", headers=headers)).status_code


KINDS: dict[str, tuple[Right, str | None, bool]] = {
    # kind: (the right request, the login whose cookie it sends, whether it clears)
    "read-only token": (_bearer(READONLY), None, False),
    "metrics token": (_bearer(METRICS, "/metrics"), None, False),
    "read-only login form": (_form(READONLY), None, False),
    "read-only session cookie": (_cookie, READONLY, False),
    "admin session cookie": (_cookie, ADMIN, False),
    "admin token": (_bearer(ADMIN), None, True),
    "admin Basic": (_basic, None, True),
    "admin login form": (_form(ADMIN), None, True),
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_right_requests_between_wrong_guesses(
    kind: str, settings: Settings, client: Client
) -> None:
    """A right request of ``kind``, then a wrong admin token, over and over: the guesses
    are answered 401 for the free tries, then 429, unless the right request was of the
    admin credentials (which clear the count: no guessing is needed with those)."""
    auth = Auth(basic=BASIC, token=ADMIN, readonly_token=READONLY, metrics_token=METRICS)
    app = create_app(settings, client=client, auth=auth)
    right, session, clears = KINDS[kind]
    cookies = {"session": await _login(app, session)} if session else {}
    rounds = Throttle.FREE + 4
    guesses: list[int] = []
    rights: list[int] = []
    async with _client(app, "10.0.1.7") as attacker:
        for _ in range(rounds):
            rights.append(await right(attacker, cookies))
            guesses.append((await attacker.get("/api/queues", headers=GUESS)).status_code)
    # before the throttle engages, the right requests are let in
    assert all(s in (200, 303) for s in rights[: Throttle.FREE + 1]), rights
    assert guesses[: Throttle.FREE + 1] == [401] * (Throttle.FREE + 1), (kind, guesses)
    if clears:
        assert guesses == [401] * rounds, (kind, guesses)
    else:
        assert 429 in guesses[Throttle.FREE + 1 :], (kind, guesses)
