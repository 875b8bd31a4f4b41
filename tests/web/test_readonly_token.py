"""Read-only credentials for people: ``web_readonly_token`` opens every page and every
GET of the API, and no change, whether it comes as a bearer header or through the login
form; a read-only session cannot be turned into an admin one; the admin token still
acts. Over real connections to uvicorn serving the app; Redis is real."""

from __future__ import annotations

import httpx
import pytest
import redis

from rota import Settings
from rota.cli.common import ExitError
from rota.cli.web import _credentials
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.web.live import LiveServer
from tests.web.test_sessions import CSRF, enqueues, login, logout, reads

TOKEN, READONLY = "tok-admin-1", "tok-look-1"

pytestmark = pytest.mark.timeout(60)


def _serve(settings: Settings) -> LiveServer:
    auth = Auth(token=TOKEN, readonly_token=READONLY)
    return LiveServer(create_app(settings, auth=auth))


def test_the_read_only_token_reads_everything_and_changes_nothing(
    settings: Settings, redis_sync: redis.Redis
) -> None:
    queue = "{" + settings.namespace + "}:queue:mail"
    body = {"name": "mail", "args": [1]}
    with _serve(settings) as server:
        look = {"authorization": f"Bearer {READONLY}"}
        assert httpx.get(server.url + "/api/queues", headers=look).status_code == 200
        assert httpx.get(server.url + "/dead", headers=look).status_code == 200
        refused = httpx.post(server.url + "/api/jobs", json=body, headers=look)
        assert refused.status_code == 403, refused.text
        assert "read-only" in refused.text
        for path in ("/api/dead/delete", "/api/queues/mail/pause", "/api/queues/mail/clear"):
            assert httpx.post(server.url + path, headers=look).status_code == 403, path
        assert redis_sync.llen(queue) == 0
        act = {"authorization": f"Bearer {TOKEN}"}
        assert httpx.post(server.url + "/api/jobs", json=body, headers=act).status_code == 201
        assert redis_sync.llen(queue) == 1


def test_a_read_only_login_looks_and_cannot_be_made_an_admin_one(
    settings: Settings, redis_sync: redis.Redis
) -> None:
    with _serve(settings) as server:
        session, _ = login(server.url, READONLY)
        assert reads(server.url, session) == 200
        page = httpx.get(server.url + "/", headers={"cookie": f"{SESSION_COOKIE}={session}"})
        assert "read-only" in page.text
        assert enqueues(server.url, session) == 403
        # The id says "read-only" under the signature: without its mark it opens nothing.
        assert session.startswith("r")
        assert reads(server.url, session[1:]) == 401
        assert enqueues(server.url, session[1:]) == 401
        logout(server.url, session)  # a read-only login still ends itself
        assert reads(server.url, session) == 401
        admin, _ = login(server.url, TOKEN)
        assert not admin.startswith("r")
        assert enqueues(server.url, admin) == 201
    assert redis_sync.llen("{" + settings.namespace + "}:queue:mail") == 1


def test_the_read_only_token_needs_an_admin_token_beside_it(settings: Settings) -> None:
    with pytest.raises(ExitError, match="give --token"):
        _credentials(None, None, settings.replace(web_readonly_token=READONLY))
    with pytest.raises(ExitError, match="must differ"):
        _credentials(None, READONLY, settings.replace(web_readonly_token=READONLY))
    auth = _credentials(None, TOKEN, settings.replace(web_readonly_token=READONLY))
    assert (auth.token_role(TOKEN), auth.token_role(READONLY), auth.token_role("x")) == (
        "admin",
        "read",
        None,
    )


def test_a_read_only_cookie_with_a_csrf_token_still_cannot_post_a_form(
    settings: Settings,
) -> None:
    """The form path (a browser's POST with the CSRF field) is refused the same way."""
    with _serve(settings) as server:
        session, _ = login(server.url, READONLY)
        cookies = f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}={CSRF}"
        out = httpx.post(
            server.url + "/dead/delete-all",
            data={"csrf": CSRF},
            headers={"cookie": cookies, "origin": server.url},
        )
        assert out.status_code == 403
        assert "read-only" in out.text
