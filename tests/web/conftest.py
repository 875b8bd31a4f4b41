"""Fixtures of the web tests: the app over an ASGI transport, with real Redis, and the
headless Chromium of the browser tests."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Browser, Dialog, Page, sync_playwright
from starlette.applications import Starlette

from rota import Client, Settings
from rota.web import create_app
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.live import LiveServer, Seeded, seed

T = TypeVar("T")

BASE = "http://127.0.0.1:5040"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture
def settings(redis_url: str, namespace: str) -> Settings:
    return pool_settings(redis_url, namespace)


@pytest.fixture
def app(settings: Settings, client: Client) -> Starlette:
    return create_app(settings, client=client)


@pytest.fixture
async def http(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


@pytest.fixture
async def seeded(client: Client, redis_url: str, namespace: str) -> Seeded:
    return await seed(client, redis_url, namespace)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium not found: `make chromium` installs it (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class Site:
    """The UI of a fresh namespace served on a loopback port, for the browser tests; a
    client of that namespace, called from the test's thread through ``portal``."""

    url: str
    portal: BlockingPortal
    client: Client
    redis_url: str
    namespace: str

    def call(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self.portal.call(lambda: func(*args, **kwargs))

    def record(self, job_id: str) -> Any:
        return self.call(self.client.job, job_id)

    def state(self, job_id: str) -> str | None:
        record = self.record(job_id)
        return record.state if record is not None else None


@pytest.fixture(scope="module")
def site(redis_server: RedisServer) -> Iterator[Site]:
    """The UI of a fresh namespace for a module's browser tests; each test enqueues under
    job names of its own."""
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
    dialogs: list[str]  # the questions asked (each answered yes)


@pytest.fixture
def tab(browser: Browser) -> Iterator[Tab]:
    """A desktop-sized page of its own that answers yes to every dialog and keeps the
    console's and the scripts' errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    tab = Tab(page, [], [])

    def on_dialog(dialog: Dialog) -> None:
        tab.dialogs.append(dialog.message)
        dialog.accept()

    page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    page.on("dialog", on_dialog)
    yield tab
    context.close()
