"""Login sessions end: each login its own value, an expiry the server enforces, a logout
that ends the session on the server (the old cookie no longer reads or enqueues, in any
process of the UI), and a new token that ends every session. The cookie used to be
HMAC(token, constant): the same for every login, alive after logout, forever.

Over real connections to uvicorn serving the app on a loopback port; Redis is real."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis

from rota import Settings
from rota.protocol.keys import Keys
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.cli_helpers import rota_env, run_rota
from tests.redis_server import RedisServer, free_port
from tests.test_acl import settings_for
from tests.web.live import LiveServer
from tests.web.test_cli_web import _start, _stop, _wait_for_event

TOKEN = "tok-sessions-1"
CSRF = "c" * 43  # a CSRF cookie of the replaying client's own, repeated in its header

pytestmark = pytest.mark.timeout(60)


@contextmanager
def serving(
    settings: Settings, token: str = TOKEN, session_ttl: float | None = None
) -> Iterator[str]:
    """A UI process of its own (its own app, its own Redis client) while the block
    runs; its URL. ``session_ttl``: the app's default (12 h) when not given."""
    auth = Auth(token=token) if session_ttl is None else Auth(token=token, session_ttl=session_ttl)
    with LiveServer(create_app(settings, auth=auth)) as server:
        yield server.url


def login(url: str, token: str = TOKEN) -> tuple[str, str]:
    """Log in through the form as a browser does; the session cookie's value and its
    Set-Cookie header."""
    with httpx.Client(base_url=url) as browser:
        browser.get("/login")
        csrf = browser.cookies[CSRF_COOKIE]
        done = browser.post("/login", data={"token": token, "csrf": csrf, "next": "/"})
        assert done.status_code == 303, done.text
        return browser.cookies[SESSION_COOKIE], done.headers["set-cookie"]


def logout(url: str, session: str) -> None:
    cookies = f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}={CSRF}"
    with httpx.Client(base_url=url) as browser:
        out = browser.post("/logout", data={"csrf": CSRF}, headers={"cookie": cookies})
        assert (out.status_code, out.headers["location"]) == (303, "/login")


def reads(url: str, session: str | bytes) -> int:
    """The status of ``GET /api/queues`` with this cookie, on a new connection (bytes:
    a cookie no browser would send, past ASCII)."""
    value = session.encode() if isinstance(session, str) else session
    cookie = [(b"cookie", SESSION_COOKIE.encode() + b"=" + value)]
    return httpx.get(url + "/api/queues", headers=cookie).status_code


def enqueues(url: str, session: str) -> int:
    """The status of ``POST /api/jobs`` with this cookie (and a right CSRF token)."""
    headers = {"cookie": f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}={CSRF}", "x-csrf-token": CSRF}
    body = {"name": "mail", "args": [1]}
    return httpx.post(url + "/api/jobs", json=body, headers=headers).status_code


def test_each_login_is_its_own_session(settings: Settings) -> None:
    with serving(settings) as url:
        (first, header), (second, _) = login(url), login(url)
        assert first != second and TOKEN not in first + second
        assert "Max-Age=43200" in header and "HttpOnly" in header and "SameSite=strict" in header
        assert (reads(url, first), reads(url, second)) == (200, 200)


def test_logout_ends_the_session_on_the_server(
    settings: Settings, redis_sync: redis.Redis, namespace: str
) -> None:
    keys = Keys(namespace)
    with serving(settings) as url, serving(settings) as other_process:
        session, _ = login(url)
        kept, _ = login(url)  # a second login, in another browser
        assert (reads(url, session), enqueues(url, session)) == (200, 201)
        logout(url, session)
        for where in (url, other_process):  # the old cookie, replayed anywhere
            assert (reads(where, session), enqueues(where, session)) == (401, 401)
            html = {"cookie": f"{SESSION_COOKIE}={session}", "accept": "text/html"}
            page = httpx.get(where + "/queues", headers=html)
            assert page.status_code == 401 and "Log in" in page.text
            assert "Log out" not in page.text  # it offered to end what had ended
        assert redis_sync.llen(keys.queue("mail")) == 1  # the one enqueue before logout
        assert (reads(url, kept), reads(other_process, kept)) == (200, 200)  # lives on
    ended = redis_sync.zrange(keys.web_sessions_ended, 0, -1)
    assert ended == [session.split(".")[0].encode()]
    assert keys.web_sessions_ended.startswith("{" + namespace + "}:")
    assert 0 < redis_sync.pttl(keys.web_sessions_ended) <= 43_260_000


def test_an_expired_session_is_refused_whatever_the_browser_kept(settings: Settings) -> None:
    with serving(settings, session_ttl=2) as url:
        session, header = login(url)
        assert "Max-Age=2" in header
        assert reads(url, session) == 200
        time.sleep(2.5)
        assert (reads(url, session), enqueues(url, session)) == (401, 401)
    from rota.web.sessions import Sessions

    sessions = Sessions(TOKEN, 43200)
    with serving(settings) as url:
        assert reads(url, sessions.issue(now=time.time() - 43201)) == 401
        assert reads(url, sessions.issue(now=time.time() - 43000)) == 200
    with serving(settings, session_ttl=60) as url:  # a shorter expiry, set later
        assert reads(url, sessions.issue(now=time.time() - 120)) == 401


def test_a_new_token_ends_every_session(settings: Settings) -> None:
    with serving(settings) as url:
        session, _ = login(url)
    with serving(settings, token="tok-sessions-2") as url:
        assert (reads(url, session), enqueues(url, session)) == (401, 401)
    with serving(settings) as url:  # a restart with the same token keeps them
        assert reads(url, session) == 200


def test_a_longer_expiry_set_later_does_not_bring_back_an_ended_session(
    settings: Settings, redis_sync: redis.Redis, namespace: str
) -> None:
    """Redis forgets a logout once its session was due to end; the end is signed into
    the cookie, so a longer web_session_ttl set afterwards cannot revive it."""
    with serving(settings, session_ttl=2) as url:
        session, _ = login(url)
        logout(url, session)
        time.sleep(2.5)
        logout(url, login(url)[0])  # a later logout sweeps the ended ids past their end
    ended = redis_sync.zrange(Keys(namespace).web_sessions_ended, 0, -1)
    assert session.split(".")[0].encode() not in ended
    with serving(settings, session_ttl=43200) as url:
        assert reads(url, session) == 401


@pytest.mark.parametrize(
    "forged",
    [
        b"",
        b"x",
        b"a.b.c",
        b"0123.99999999999.deadbeef",
        b"..",
        b"id.12.",
        b"id.-1.ab",
        b"id.1.2.3.4",
        b"id.\xb2.\xb3.ab",  # digits to str.isdigit, not to int
        b"id.1795000000.1795043200.\xe9",  # not ASCII where the signature goes
    ],
)
def test_a_forged_cookie_opens_nothing(settings: Settings, forged: bytes) -> None:
    with serving(settings) as url:
        assert reads(url, forged) == 401


def test_a_read_only_ui_ends_sessions_too(redis_server: RedisServer) -> None:
    """The ACL role of a read-only UI (rota acl web) allows the writes a logout needs,
    and nothing else."""
    version = str(redis_server.client().info("server")["redis_version"])
    if int(version.split(".")[0]) < 7:
        pytest.skip(f"the roles use Redis 7's key selectors; this is {version}")
    settings = settings_for(redis_server, "web", "t" + uuid.uuid4().hex[:12])
    with serving(settings) as url:
        session, _ = login(url)
        assert reads(url, session) == 200
        logout(url, session)
        assert reads(url, session) == 401


@pytest.mark.parametrize(
    ("flag", "env", "max_age"),
    [(["--session-ttl", "90m"], {}, 5400), ([], {"ROTA_WEB_SESSION_TTL": "60"}, 60)],
)
def test_rota_web_takes_the_expiry_from_a_flag_or_the_environment(
    tmp_path: Path,
    redis_url: str,
    namespace: str,
    flag: list[str],
    env: dict[str, str],
    max_age: int,
) -> None:
    port = free_port()
    args = [
        "web",
        "--bind",
        f"127.0.0.1:{port}",
        "--redis-url",
        redis_url,
        "--namespace",
        namespace,
    ]
    log = tmp_path / "web.log"
    proc = _start(
        [*args, *flag], log, rota_env(ROTA_WEB_TOKEN=TOKEN, ROTA_LOG_FORMAT="json", **env)
    )
    try:
        url = _wait_for_event(proc, log, "web started")["url"]
        assert f"Max-Age={max_age};" in login(url)[1]
    finally:
        assert _stop(proc) == 0


def test_rota_web_refuses_an_expiry_that_is_not_one() -> None:
    for value, said in (("0", "must be more than 0"), ("1x", "is not a duration")):
        done = run_rota("web", "--token", TOKEN, "--session-ttl", value)
        assert done.returncode == 2 and "--session-ttl: " in done.stderr and said in done.stderr
    done = run_rota("web", env=rota_env(ROTA_WEB_TOKEN=TOKEN, ROTA_WEB_SESSION_TTL="-5"))
    assert done.returncode == 2 and "ROTA_WEB_SESSION_TTL" in done.stderr


def _session_reads(settings: Settings) -> int:
    with redis.Redis.from_url(settings.redis_url) as r:
        stats = r.info("commandstats")
    return int(stats.get("cmdstat_zscore", {}).get("calls", 0))


def test_a_session_is_read_from_redis_only_where_it_matters(settings: Settings) -> None:
    """Every request with a cookie asked Redis whether its session had ended, the static
    files of each page too."""
    with serving(settings) as url:
        session, _ = login(url)
        cookie = {"cookie": f"{SESSION_COOKIE}={session}"}
        before = _session_reads(settings)
        for path in ("/static/rota.css", "/static/rota.js", "/static/favicon.svg"):
            assert httpx.get(url + path, headers=cookie).status_code == 200
        assert _session_reads(settings) == before
        bearer = {**cookie, "authorization": f"Bearer {TOKEN}"}
        assert httpx.get(url + "/api/queues", headers=bearer).status_code == 200
        assert _session_reads(settings) == before
        assert reads(url, session) == 200
        assert _session_reads(settings) == before + 1
