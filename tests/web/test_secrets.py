"""Secrets stay secret and the defaults are safe, with ``rota web``, ``rota demo`` and the
CLI run as a user runs them.

- the web UI's token and the Redis password come from files and variables, not flags;
- no log line or error message shows the Redis password;
- ``rota web`` on a non-loopback address without credentials refuses to start unless
  ``--insecure-open`` says an open UI is wanted;
- behind a trusted proxy that says ``X-Forwarded-Proto: https`` the session cookie is
  ``Secure``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli_helpers import log_events, rota_env, run_rota
from tests.redis_server import RedisServer, free_port
from tests.web.test_cli_web import _start, _stop, _wait_for_event

PASSWORD = "hunter2-do-not-log"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def locked() -> Iterator[RedisServer]:
    """A Redis that wants a password."""
    with RedisServer() as server:
        server.client().config_set("requirepass", PASSWORD)
        yield server


def _url(server: RedisServer, password: str = PASSWORD) -> str:
    return f"redis://:{password}@127.0.0.1:{server.port}/0"


def test_an_open_ui_on_the_network_needs_a_flag_that_says_so(
    locked: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    env = rota_env(ROTA_REDIS_URL=_url(locked))
    done = run_rota("web", "--bind", f"0.0.0.0:{port}", env=env)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--insecure-open" in line and "--token" in line and "--auth" in line
    # An open UI on the network answers to the names it is given, and no other: without
    # a Host check a web page could reach it through DNS rebinding.
    done = run_rota("web", "--bind", f"0.0.0.0:{port}", "--insecure-open", env=env)
    assert done.returncode == 2
    assert "--allowed-host" in done.stderr and "DNS rebinding" in done.stderr
    log = tmp_path / "open.log"
    args = ["web", "--bind", f"0.0.0.0:{port}", "--insecure-open", "--allowed-host", "127.0.0.1"]
    proc = _start(args, log, {**env, "ROTA_LOG_FORMAT": "json"})
    try:
        started = _wait_for_event(proc, log, "web started")
        assert started["auth"] == "off"
        assert httpx.get(f"http://127.0.0.1:{port}/api/queues").status_code == 200
        rebound = httpx.get(f"http://127.0.0.1:{port}/api/queues", headers={"host": "evil.test"})
        assert rebound.status_code == 400 and "127.0.0.1" in rebound.text
    finally:
        assert _stop(proc) == 0
    assert PASSWORD not in log.read_text()


def test_allowed_host_lets_a_proxy_keep_the_original_host(
    locked: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    env = rota_env(ROTA_REDIS_URL=_url(locked), ROTA_LOG_FORMAT="json")
    log = tmp_path / "proxied.log"
    args = ["web", "--bind", f"127.0.0.1:{port}", "--allowed-host", "Queue.Example.com"]
    proc = _start(args, log, env)
    try:
        _wait_for_event(proc, log, "web started")
        base = f"http://127.0.0.1:{port}"
        kept = httpx.get(base + "/api/queues", headers={"host": "queue.example.com"})
        assert kept.status_code == 200  # what the proxy passes on
        assert httpx.get(base + "/api/queues").status_code == 200  # loopback names still
        other = httpx.get(base + "/api/queues", headers={"host": "other.example.com"})
        assert other.status_code == 400 and "queue.example.com" in other.text
    finally:
        assert _stop(proc) == 0


def test_web_credentials_from_files_and_no_password_in_the_log(
    locked: RedisServer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("file-token-123\n")
    redis_password = tmp_path / "redis-password"
    redis_password.write_text(PASSWORD + "\n")
    port = free_port()
    env = rota_env(
        ROTA_REDIS_URL=f"redis://127.0.0.1:{locked.port}/0",
        ROTA_REDIS_PASSWORD_FILE=str(redis_password),
        ROTA_WEB_TOKEN_FILE=str(token),
        ROTA_LOG_FORMAT="json",
    )
    log = tmp_path / "web.log"
    proc = _start(["web", "--bind", f"0.0.0.0:{port}", "--trusted-proxy", "127.0.0.1"], log, env)
    try:
        started = _wait_for_event(proc, log, "web started")
        assert started["auth"] == "on"
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/api/queues").status_code == 401
        bearer = {"authorization": "Bearer file-token-123"}
        assert httpx.get(base + "/api/queues", headers=bearer).status_code == 200
        # The proxy in front (on loopback, trusted by the flag) says the page is HTTPS.
        form = {"token": "file-token-123", "next": "/"}
        for proto, secure in (("https", True), ("http", False)):
            done = httpx.post(
                base + "/login",
                data=form,
                headers={"x-forwarded-proto": proto, "origin": f"{proto}://127.0.0.1:{port}"},
            )
            assert done.status_code == 303, done.text
            session = [h for h in done.headers.get_list("set-cookie") if "rota_session" in h]
            assert session and ("Secure" in session[0]) is secure, session
    finally:
        assert _stop(proc) == 0
    assert PASSWORD not in log.read_text()


def test_a_proxy_that_is_not_trusted_is_not_believed(locked: RedisServer, tmp_path: Path) -> None:
    port = free_port()
    env = rota_env(ROTA_REDIS_URL=_url(locked), ROTA_WEB_AUTH="ada:pw", ROTA_LOG_FORMAT="json")
    log = tmp_path / "web.log"
    args = ["web", "--bind", f"127.0.0.1:{port}", "--trusted-proxy", "10.9.9.9"]
    proc = _start(args, log, env)
    try:
        _wait_for_event(proc, log, "web started")
        # A loopback client saying HTTPS is not a trusted proxy here: the cookie it
        # gets (the CSRF one) is not Secure.
        done = httpx.get(
            f"http://127.0.0.1:{port}/queues",
            auth=("ada", "pw"),
            headers={"x-forwarded-proto": "https", "accept": "text/html"},
        )
        assert done.status_code == 200
        cookies = done.headers.get_list("set-cookie")
        assert cookies and all("Secure" not in h for h in cookies), cookies
        assert httpx.get(f"http://127.0.0.1:{port}/api/queues").status_code == 401
    finally:
        assert _stop(proc) == 0
    assert PASSWORD not in log.read_text()


def test_the_demo_and_failed_connections_never_show_the_password(
    locked: RedisServer, tmp_path: Path
) -> None:
    log = tmp_path / "demo.log"
    env = rota_env(ROTA_LOG_FORMAT="json")
    proc = _start(["demo", "--rate", "5", "--redis-url", _url(locked)], log, env)
    try:
        _wait_for_event(proc, log, "web UI")
    finally:
        assert _stop(proc) == 0
    (started,) = [e for e in log_events(log) if e.get("event") == "demo started"]
    assert started["redis_url"] == f"redis://:***@127.0.0.1:{locked.port}/0"
    assert PASSWORD not in log.read_text()

    unreachable = run_rota("status", "--redis-url", f"redis://:{PASSWORD}@127.0.0.1:1/0")
    wrong = run_rota("status", "--redis-url", _url(locked, "not-" + PASSWORD))
    for done in (unreachable, wrong):
        assert done.returncode == 2
        assert PASSWORD not in done.stderr + done.stdout
        assert ":***@127.0.0.1" in done.stderr
    assert wrong.stderr.startswith("rota: redis_url: Redis at redis://:***@")  # its password
    assert unreachable.stderr.startswith("rota: redis_url: cannot connect")


def test_rota_web_stops_at_once_on_a_wrong_password_or_no_redis(locked: RedisServer) -> None:
    port = free_port()
    wrong = run_rota("web", "--bind", f"127.0.0.1:{port}", "--redis-url", _url(locked, "nope"))
    assert wrong.returncode == 2
    (line,) = wrong.stderr.strip().splitlines()
    assert line.startswith("rota: redis_url: Redis at redis://:***@") and "nope" not in line
    away = run_rota("web", "--bind", f"127.0.0.1:{port}", "--redis-url", "redis://127.0.0.1:1/0")
    assert away.returncode == 2
    (line,) = away.stderr.strip().splitlines()
    assert line.startswith("rota: redis_url: cannot connect to redis://127.0.0.1:1/0")
