"""The UI in a real headless Chromium: a real server on a loopback port, a running pool,
clicks, escaping, cross-site refusal and authentication. Screenshots of every page go
to artifacts/screenshots/."""

from __future__ import annotations

import http.server
import re
import shutil
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from rota import Client
from rota.web import Auth, create_app
from tests.cli_helpers import REPO
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer
from tests.web.live import IMG, SCRIPT, LiveServer, Seeded, enqueue_examples, example_pool, settled

SHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
T = TypeVar("T")


@dataclass
class Live:
    url: str
    portal: BlockingPortal
    client: Client
    seeded: Seeded
    slow_id: str
    redis_url: str
    namespace: str

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.portal.call(func, *args)

    def state(self, job_id: str) -> str | None:
        record = self.call(self.client.job, job_id)
        return record.state if record is not None else None


@pytest.fixture(scope="module")
def live(redis_server: RedisServer) -> Iterator[Live]:
    """A running pool (one long job busy, the example jobs settled) and the UI."""
    url, namespace = redis_server.url, "t" + uuid.uuid4().hex[:12]
    with start_blocking_portal() as portal:
        client = Client.from_url(url, namespace)
        pool = example_pool(url, namespace, heartbeat_interval=1.0, lease=10.0)
        try:
            seeded = portal.call(enqueue_examples, client)
            for i in range(5):
                portal.call(_enqueue, client, "mail", i)  # no pool serves it: stays queued
            slow = portal.call(_enqueue, client, "slow", 600)
            with portal.wrap_async_context_manager(pool.running()):
                portal.call(lambda: wait_until(lambda: settled(client, seeded), within=20))
                app = create_app(pool_settings(url, namespace, heartbeat_interval=1.0))
                with LiveServer(app) as server:
                    yield Live(server.url, portal, client, seeded, slow, url, namespace)
        finally:
            portal.call(client.close)


async def _enqueue(client: Client, name: str, arg: Any) -> str:
    if name == "slow":
        return (await client.enqueue(name, seconds=arg)).id
    return (await client.enqueue(name, arg)).id


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
class Watched:
    page: Page
    dialogs: list[str]
    errors: list[str]


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    """A page whose dialogs, console errors and script errors are recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    w = Watched(page, [], [])

    def on_dialog(dialog: Dialog) -> None:
        w.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.accept()

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            w.errors.append(message.text)

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("pageerror", lambda exc: w.errors.append(str(exc)))
    yield w
    context.close()


def _pages(live: Live) -> dict[str, str]:
    return {
        "dashboard": "/",
        "queues": "/queues",
        "pools": "/pools",
        "busy": "/busy",
        "scheduled": "/scheduled",
        "retry": "/retry",
        "dead": "/dead",
        "job": f"/jobs/{live.seeded.complete[0]}",
        "redis": "/redis",
    }


def test_every_page_loads_with_data(live: Live, watched: Watched, browser: Browser) -> None:
    page = watched.page
    s = live.seeded
    expected: dict[str, list[str]] = {
        "dashboard": ["Last hour, per minute", "Last 30 days, per day"],
        "queues": ["mail", "boom", "slow"],
        "pools": ["ok", "boom", "slow"],
        "busy": [live.slow_id, "step "],
        "scheduled": [s.scheduled[0][:12]],
        "retry": [s.retry[0][:12], "retry requested"],
        "dead": [s.dead[1][:12], "first attempt fails"],
        "job": ["working on 0", "all done", '"n": 0'],
        "redis": ["Version", "Memory used", "connected clients"],
    }
    SHOTS.mkdir(parents=True, exist_ok=True)
    for name, path in _pages(live).items():
        response = page.goto(live.url + path)
        assert response is not None and response.status == 200, name
        for text in expected[name]:
            expect(page.locator("main")).to_contain_text(text)
        page.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    page.goto(live.url + "/")
    processed = int(page.locator('[data-key="processed"]').inner_text().replace("\u202f", ""))
    assert processed >= len(s.complete)
    assert page.locator("svg rect.processed").count() >= 1
    assert page.locator("svg rect.failed").count() >= 1
    assert watched.errors == []  # no script error, nothing blocked by the CSP
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    for name, path in _pages(live).items():
        small.goto(live.url + path)
        small.screenshot(path=SHOTS / f"phone-{name}.png", full_page=True)
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"{name} is {width}px wide on a phone"
    phone.close()


def test_figures_refresh_in_place(live: Live, watched: Watched) -> None:
    page = watched.page
    page.goto(live.url + "/queues")
    page.evaluate("window.stillHere = true")
    row = page.locator("tr", has=page.locator("td.name", has_text=re.compile("^mail$")))
    expect(row).to_contain_text("active")
    live.call(live.client.pause, "mail")
    try:
        expect(row).to_contain_text("paused", timeout=20_000)  # refreshed every 5 s
        assert page.evaluate("window.stillHere") is True  # no reload: the region was swapped
    finally:
        live.call(live.client.resume, "mail")
    page.goto(live.url + "/redis")
    rtt = page.locator("#browser-rtt")
    expect(rtt).to_have_text(re.compile(r"^\d+(\.\d)?$"), timeout=10_000)
    expect(page.locator('[data-key="ping_ms"]')).to_have_text(re.compile(r"^\d+\.\d\d$"))
    assert watched.errors == []


def _row(page: Page, job_id: str) -> Any:
    return page.locator("tr", has=page.locator(f'a[href="/jobs/{job_id}"]'))


def test_retry_and_delete_a_dead_job_by_clicking(live: Live, watched: Watched) -> None:
    page = watched.page
    flaky, doomed = live.seeded.flaky[0], live.seeded.dead[1]
    assert live.state(flaky) == "dead"
    page.goto(live.url + "/dead")
    with page.expect_navigation():
        _row(page, flaky).get_by_role("button", name="Retry now").click()
    expect(page.locator(".notice")).to_have_text("1 jobs queued again.")
    assert page.url.startswith(live.url + "/dead")
    # its second attempt succeeds
    live.call(lambda: wait_until(lambda: _is(live, flaky, "complete"), within=15))
    assert _row(page, flaky).count() == 0

    with page.expect_navigation():
        _row(page, doomed).get_by_role("button", name="Delete").click()
    expect(page.locator(".notice")).to_have_text("1 jobs deleted.")
    assert _row(page, doomed).count() == 0
    assert live.state(doomed) is None
    assert watched.dialogs == []


async def _is(live: Live, job_id: str, state: str) -> bool:
    record = await live.client.job(job_id)
    return record is not None and record.state == state


def test_script_in_args_is_shown_as_text_and_never_runs(live: Live, watched: Watched) -> None:
    page = watched.page
    job_id = live.seeded.script
    page.goto(live.url + f"/jobs/{job_id}")
    expect(page.locator("#job-args")).to_contain_text(SCRIPT)
    expect(page.locator("#job-error")).to_contain_text(IMG)
    page.goto(live.url + "/dead?q=boom")
    expect(_row(page, job_id)).to_contain_text(SCRIPT)
    expect(_row(page, job_id)).to_contain_text(IMG)
    page.wait_for_timeout(1500)
    assert watched.dialogs == []
    assert page.locator("img[src=x]").count() == 0


class _Forger(http.server.BaseHTTPRequestHandler):
    """Serves a page of another origin with a form aimed at the UI."""

    target = ""

    def do_GET(self) -> None:
        html = (
            "<!doctype html><title>elsewhere</title>"
            f'<form method="post" action="{self.target}">'
            '<input type="hidden" name="csrf" value="guessed">'
            '<input type="hidden" name="next" value="/queues">'
            '<button type="submit">win a prize</button></form>'
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(html)))
        self.end_headers()
        self.wfile.write(html)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("forger_host", ["localhost", "127.0.0.1"])
def test_cross_site_post_is_refused(live: Live, watched: Watched, forger_host: str) -> None:
    handler = type("Forger", (_Forger,), {"target": live.url + "/queues/mail/pause"})
    server = http.server.ThreadingHTTPServer((forger_host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        page = watched.page
        page.goto(f"http://{forger_host}:{server.server_address[1]}/")
        with page.expect_navigation() as nav:
            page.get_by_role("button", name="win a prize").click()
        response = nav.value
        assert response is not None and response.status == 403
        expect(page.locator("main")).to_contain_text("cross-site request refused")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    queues = {q.name: q for q in live.call(live.client.queues)}
    assert queues["mail"].paused is False


def test_authentication_refuses_anonymous(live: Live, browser: Browser) -> None:
    settings = pool_settings(live.redis_url, live.namespace)
    with LiveServer(create_app(settings, auth=Auth(token="open-sesame"))) as server:
        context = browser.new_context()
        page = context.new_page()
        response = page.goto(server.url + "/queues")
        assert response is not None and response.status == 401
        api = page.request.get(server.url + "/api/queues")
        assert api.status == 401
        page.fill("#token", "wrong")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        expect(page.locator("main")).to_contain_text("Wrong token.")
        page.fill("#token", "open-sesame")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        assert page.url == server.url + "/queues"
        expect(page.locator("h1")).to_have_text("Queues")
        page.screenshot(path=SHOTS / "login-then-queues.png")
        with page.expect_navigation():
            page.get_by_role("button", name="Log out").click()
        assert page.request.get(server.url + "/api/queues").status == 401
        context.close()
    with LiveServer(create_app(settings, auth=Auth(basic=("ada", "pw")))) as server:
        anonymous = browser.new_context()
        page = anonymous.new_page()
        # headless Chromium has nobody to ask for a password: the navigation fails,
        # after the 401 came back
        with page.expect_response(server.url + "/") as answer, pytest.raises(PlaywrightError):
            page.goto(server.url + "/")
        assert answer.value.status == 401
        assert answer.value.headers["www-authenticate"].startswith("Basic")
        anonymous.close()
        known = browser.new_context(http_credentials={"username": "ada", "password": "pw"})
        response = known.new_page().goto(server.url + "/")
        assert response is not None and response.status == 200
        known.close()
