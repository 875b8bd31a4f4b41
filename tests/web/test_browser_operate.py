"""What an operator does beyond the lists, in a real headless Chromium: read a queue's
contents a page at a time. A real server on a loopback port, real Redis; screenshots go
to artifacts/screenshots/."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Browser, Page, expect

from rota import Client
from rota.web import create_app
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.live import LiveServer
from tests.web.test_browser import SHOTS

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]
T = TypeVar("T")


@dataclass
class Site:
    url: str
    portal: BlockingPortal
    client: Client
    redis_url: str
    namespace: str

    def call(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self.portal.call(lambda: func(*args, **kwargs))


@pytest.fixture(scope="module")
def site(redis_server: RedisServer) -> Iterator[Site]:
    """The UI of a fresh namespace; each test enqueues under job names of its own."""
    url, namespace = redis_server.url, "t" + uuid.uuid4().hex[:12]
    with start_blocking_portal() as portal:
        client = Client.from_url(url, namespace)
        try:
            app = create_app(pool_settings(url, namespace, heartbeat_interval=1.0))
            with LiveServer(app) as server:
                yield Site(server.url, portal, client, url, namespace)
        finally:
            portal.call(client.close)


@dataclass
class Tab:
    page: Page
    errors: list[str]  # console errors and script errors


@pytest.fixture
def tab(browser: Browser) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    tab = Tab(page, [])
    page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    yield tab
    context.close()


def _fits_a_phone(browser: Browser, url: str, shot: str) -> None:
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    small.goto(url)
    small.screenshot(path=SHOTS / shot, full_page=True)
    width = small.evaluate("document.documentElement.scrollWidth")
    phone.close()
    assert width <= 400, f"{url} is {width}px wide on a phone"


def _job_ids(page: Page) -> list[str]:
    found: list[str] = page.locator("table.queued tbody td.mono a").all_inner_texts()
    return found


def test_a_queues_jobs_page_by_page(site: Site, tab: Tab, browser: Browser) -> None:
    ids = [site.call(site.client.enqueue, "letters", i).id for i in range(30)]
    page = tab.page
    page.goto(site.url + "/queues")
    with page.expect_navigation():
        page.locator("td.name").get_by_role("link", name="letters", exact=True).click()
    assert page.url == site.url + "/queues/letters"
    expect(page.locator("h1")).to_have_text("Queue letters")
    expect(page.locator("#queue-summary")).to_contain_text("30 jobs waiting")
    expect(page.locator("#queue-summary .no-pool")).to_have_text("no pool")
    assert _job_ids(page) == ids[:25]  # the next to run first
    expect(page.locator("table.queued tbody tr").first).to_contain_text("[0]")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "queue.png", full_page=True)
    with page.expect_navigation():
        page.get_by_role("link", name="next →").click()
    assert _job_ids(page) == ids[25:]
    with page.expect_navigation():
        page.locator("#order-newest").click()
    assert _job_ids(page) == ids[::-1][:25]
    with page.expect_navigation():
        page.get_by_role("link", name="last »").click()
    assert _job_ids(page) == ids[::-1][25:]
    # a job that runs leaves the list; the page follows by itself
    page.goto(site.url + "/queues/letters")
    page.evaluate("window.stillHere = true")
    site.call(site.client.redis.rpop, site.client.keys.queue("letters"))
    expect(page.locator("#queue-summary")).to_contain_text("29 jobs waiting", timeout=20_000)
    assert page.evaluate("window.stillHere") is True
    assert _job_ids(page) == ids[1:26]
    with page.expect_navigation():
        page.get_by_role("button", name="Pause").click()
    expect(page.locator(".notice")).to_have_text("Queue paused.")
    assert page.url.startswith(site.url + "/queues/letters")
    assert tab.errors == []
    _fits_a_phone(browser, site.url + "/queues/letters", "phone-queue.png")
