"""Fixtures of the web tests: the app over an ASGI transport, with real Redis, and the
headless Chromium of the browser tests."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright
from starlette.applications import Starlette

from rota import Client, Settings
from rota.web import create_app
from tests.helpers import pool_settings
from tests.web.live import Seeded, seed

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
