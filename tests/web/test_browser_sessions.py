"""Sessions in a real headless Chromium: two browsers that log in get two sessions, and
after one logs out by clicking, its cookie put back into the browser (as a copy of it
would be) opens no page, reads no API and enqueues nothing, while the other browser's
session goes on. A screenshot goes to artifacts/screenshots/."""

from __future__ import annotations

import pytest
import redis
from playwright.sync_api import Browser, BrowserContext, Page, expect

from rota import Settings
from rota.protocol.keys import Keys
from rota.web import Auth, create_app
from rota.web.middleware.auth import SESSION_COOKIE
from rota.web.middleware.csrf import CSRF_COOKIE
from tests.web.live import LiveServer
from tests.web.test_browser import SHOTS

TOKEN = "tok-browser-sessions"

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _log_in(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    response = page.goto(url + "/queues")
    assert response is not None and response.status == 401
    page.fill("#token", TOKEN)
    with page.expect_navigation():
        page.get_by_role("button", name="Log in").click()
    assert page.url == url + "/queues"
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    return page


def _cookie(context: BrowserContext, name: str) -> str:
    """The value of the context's cookie ``name``."""
    found = [c.get("value", "") for c in context.cookies() if c.get("name") == name]
    assert len(found) == 1, context.cookies()
    return found[0]


def test_logout_ends_the_session_even_for_a_copy_of_its_cookie(
    browser: Browser, settings: Settings, redis_sync: redis.Redis, namespace: str
) -> None:
    with LiveServer(create_app(settings, auth=Auth(token=TOKEN))) as server:
        url = server.url
        mine, yours = browser.new_context(), browser.new_context()
        try:
            page = _log_in(mine, url)
            other = _log_in(yours, url)
            copy = _cookie(mine, SESSION_COOKIE)
            assert copy != _cookie(yours, SESSION_COOKIE)
            assert TOKEN not in copy

            with page.expect_navigation():
                page.get_by_role("button", name="Log out").click()
            assert page.url == url + "/login"
            assert SESSION_COOKIE not in {c.get("name") for c in mine.cookies()}

            mine.add_cookies([{"name": SESSION_COOKIE, "value": copy, "url": url}])  # put back
            response = page.goto(url + "/queues")
            assert response is not None and response.status == 401
            expect(page.get_by_role("button", name="Log in")).to_be_visible()
            expect(page.get_by_role("button", name="Log out")).to_have_count(0)
            page.screenshot(path=SHOTS / "ended-session.png")
            assert page.request.get(url + "/api/queues").status == 401
            csrf = _cookie(mine, CSRF_COOKIE)
            enqueue = page.request.post(
                url + "/api/jobs",
                data={"name": "mail", "args": [1]},
                headers={"x-csrf-token": csrf},
            )
            assert enqueue.status == 401
            assert redis_sync.llen(Keys(namespace).queue("mail")) == 0

            response = other.goto(url + "/queues")  # the other browser goes on
            assert response is not None and response.status == 200
            assert other.request.get(url + "/api/queues").status == 200
        finally:
            mine.close()
            yours.close()
