"""The UI in a real headless Chromium: a real server on a loopback port, a running pool,
clicks, escaping, cross-site refusal, authentication, and the workflow graphs. Screenshots
of every page go to artifacts/screenshots/."""

from __future__ import annotations

import http.server
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, expect
from playwright.sync_api import Error as PlaywrightError

from rota import Client, JobSpec
from rota.web import Auth, create_app
from tests.cli_helpers import REPO
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer
from tests.web.live import IMG, SCRIPT, LiveServer, Seeded, enqueue_examples, example_pool, settled

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

SHOTS = REPO / "artifacts" / "screenshots"
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
        "waiting": "/waiting",
        "scheduled": "/scheduled",
        "retry": "/retry",
        "dead": "/dead",
        "job": f"/jobs/{live.seeded.complete[0]}",
        "redis": "/redis",
        "shards": "/shards",
    }


def test_every_page_loads_with_data(live: Live, watched: Watched, browser: Browser) -> None:
    page = watched.page
    s = live.seeded
    expected: dict[str, list[str]] = {
        "dashboard": ["Last hour, per minute", "Last 30 days, per day"],
        "queues": ["mail", "boom", "slow"],
        "pools": ["ok", "boom", "slow"],
        "busy": [live.slow_id, "step "],
        "waiting": ["Waiting jobs"],
        "scheduled": [s.scheduled[0][:12]],
        "retry": [s.retry[0][:12], "retry requested"],
        "dead": [s.dead[1][:12], "first attempt fails"],
        "job": ["working on 0", "all done", '"n": 0'],
        "redis": ["Version", "Memory used", "connected clients"],
        "shards": ["{" + live.namespace + "}"],
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
    live.call(live.client.admin.pause, "mail")
    try:
        expect(row).to_contain_text("paused", timeout=20_000)  # refreshed every 5 s
        assert page.evaluate("window.stillHere") is True  # no reload: the region was swapped
    finally:
        live.call(live.client.admin.resume, "mail")
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


def test_set_and_remove_a_rate_limit_on_the_queue_page(live: Live, watched: Watched) -> None:
    page = watched.page
    page.goto(live.url + "/queues")
    row = page.locator("tr", has=page.locator("td.name", has_text="mail"))
    row.get_by_label("rate limit of mail").fill("20/min")
    with page.expect_navigation():
        row.get_by_role("button", name="Set rate").click()
    expect(page.locator(".notice")).to_have_text("Rate limit set.")
    expect(row.locator('td[data-label="Rate limit"]')).to_have_text("20/min")
    assert [q.rate for q in live.call(live.client.admin.queues, ["mail"])] == ["20/min"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "queues-rate.png", full_page=True)
    row.get_by_label("rate limit of mail").fill("")
    with page.expect_navigation():
        row.get_by_role("button", name="Set rate").click()
    expect(page.locator(".notice")).to_have_text("Rate limit removed.")
    assert [q.rate for q in live.call(live.client.admin.queues, ["mail"])] == [None]
    assert watched.errors == []


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
    queues = {q.name: q for q in live.call(live.client.admin.queues)}
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
        with (
            page.expect_response(server.url + "/") as answer,
            pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"),
        ):
            page.goto(server.url + "/")
        assert answer.value.status == 401
        assert answer.value.headers["www-authenticate"].startswith("Basic")
        anonymous.close()
        known = browser.new_context(http_credentials={"username": "ada", "password": "pw"})
        response = known.new_page().goto(server.url + "/")
        assert response is not None and response.status == 200
        known.close()


@dataclass
class Flows:
    a: str  # ok, complete
    b: str  # ok after a, complete
    c: str  # boom after a: dead
    d: str  # ok after b and c: dead, dependency_failed
    e: str  # ok after b and blocker: waiting
    blocker: str  # slow: running
    group: str
    members: list[str]  # ok, ok, ok, boom
    then: str  # ok after the group: dead, dependency_failed


async def _enqueue_flows(client: Client) -> Flows:
    a = await client.enqueue("ok", n=1)
    b = await client.enqueue("ok", n=2, after=[a.id])
    c = await client.enqueue("boom", note="c", after=[a.id])
    d = await client.enqueue("ok", n=4, after=[b.id, c.id])
    blocker = await client.enqueue("slow", seconds=600)
    e = await client.enqueue("ok", n=5, after=[b.id, blocker.id])
    specs = [JobSpec(name="ok", kwargs={"n": i}) for i in range(3)]
    g = await client.group(
        [*specs, JobSpec(name="boom", kwargs={"note": "m"})], then=JobSpec(name="ok")
    )
    assert g.then is not None
    members = [j.id for j in g.jobs]
    return Flows(a.id, b.id, c.id, d.id, e.id, blocker.id, g.id, members, g.then.id)


async def _flows_settled(client: Client, f: Flows) -> bool:
    want = {f.a: "complete", f.b: "complete", f.c: "dead", f.d: "dead", f.e: "waiting"}
    want.update({f.blocker: "running", f.then: "dead"})
    want.update(dict.fromkeys(f.members[:3], "complete"))
    for job_id, state in want.items():
        record = await client.job(job_id)
        if record is None or record.state != state:
            return False
    return True


def _colour(page: Page, selector: str, prop: str) -> str:
    value: str = page.locator(selector).first.evaluate(f"el => getComputedStyle(el).{prop}")
    return value


def _check_graph(live: Live, page: Page, ids: list[str]) -> None:
    """One node per job, each of its job's state, coloured as the legend says."""
    nodes = page.locator("svg.graph .node")
    assert sorted(nodes.evaluate_all("els => els.map(e => e.dataset.id)")) == sorted(ids)
    for job_id in ids:
        state = live.state(job_id) or "missing"
        node = page.locator(f'svg.graph .node[data-id="{job_id}"]')
        assert node.get_attribute("data-state") == state
        assert f"st-{state}" in (node.get_attribute("class") or "").split()
        stroke = _colour(page, f'svg.graph .node[data-id="{job_id}"] rect', "stroke")
        assert stroke == _colour(page, f".legend .swatch.st-{state}", "backgroundColor")
    strokes = {
        state: _colour(page, f".legend .swatch.st-{state}", "backgroundColor")
        for state in nodes.evaluate_all("els => [...new Set(els.map(e => e.dataset.state))]")
    }
    assert len(set(strokes.values())) == len(strokes)  # a colour per state


def test_flow_and_group_pages(live: Live, watched: Watched, browser: Browser) -> None:
    f = live.call(_enqueue_flows, live.client)
    live.call(lambda: wait_until(lambda: _flows_settled(live.client, f), within=20))
    page = watched.page
    SHOTS.mkdir(parents=True, exist_ok=True)

    # the job page lists parents and children, as links, with their states
    page.goto(live.url + f"/jobs/{f.d}")
    parents = page.locator("#job-parents li")
    expect(parents).to_have_count(2)
    expect(parents.nth(0)).to_contain_text(f.b)
    expect(parents.nth(0).locator(".badge")).to_have_text("complete")
    expect(parents.nth(1).locator(".badge")).to_have_text("dead")
    with page.expect_navigation():
        parents.nth(1).get_by_role("link").click()
    assert page.url == live.url + f"/jobs/{f.c}"
    expect(page.locator("#job-children li")).to_have_text(re.compile(f"{f.d}.*dead"))
    with page.expect_navigation():
        page.locator("#flow-link").click()
    assert page.url == live.url + f"/flows/{f.c}"

    # the flow page: the whole workflow, one node per job, coloured by state
    flow = [f.a, f.b, f.c, f.d, f.e, f.blocker]
    _check_graph(live, page, flow)
    expect(page.locator("svg.graph .edge")).to_have_count(6)
    expect(page.locator("svg.graph .node.focus")).to_have_attribute("data-id", f.c)
    expect(page.locator("#flow-summary")).to_contain_text("6 jobs")
    page.screenshot(path=SHOTS / "flow.png", full_page=True)
    x = {
        job_id: page.locator(f'svg.graph .node[data-id="{job_id}"] rect').get_attribute("x")
        or "nan"  # no x: NaN, and the comparison below fails
        for job_id in (f.a, f.b, f.d)
    }
    assert float(x[f.a]) < float(x[f.b]) < float(x[f.d])  # left to right by depth
    with page.expect_navigation():
        page.locator(f'svg.graph .node[data-id="{f.e}"]').click()
    assert page.url == live.url + f"/jobs/{f.e}"
    expect(page.locator(".toolbar .badge")).to_have_text("waiting")
    page.screenshot(path=SHOTS / "job-workflow.png", full_page=True)

    # the group page: counters, the members and their callback
    page.goto(live.url + f"/jobs/{f.members[0]}")
    with page.expect_navigation():
        page.get_by_role("link", name=f.group, exact=True).click()
    assert page.url == live.url + f"/groups/{f.group}"
    expect(page.locator("#group-total")).to_have_text("4")
    expect(page.locator("#group-done")).to_have_text("3")
    expect(page.locator("#group-failed")).to_have_text("1")
    expect(page.locator("#group-left")).to_have_text("0")
    expect(page.locator("table.members tbody tr")).to_have_count(4)
    _check_graph(live, page, [*f.members, f.then])
    expect(page.locator("svg.graph .edge.group")).to_have_count(4)
    assert page.locator("svg.groupbar rect.done").count() == 1
    page.screenshot(path=SHOTS / "group.png", full_page=True)
    with page.expect_navigation():
        page.locator("#group-callback").get_by_role("link", name=f.then).click()
    expect(page.locator("main")).to_contain_text("Callback of")
    expect(page.locator("main")).to_contain_text("dependency_failed")

    # the waiting page lists the waiting job; the flow page follows a change by itself
    page.goto(live.url + "/waiting")
    expect(_row(page, f.e)).to_contain_text("1 to go")
    page.screenshot(path=SHOTS / "waiting-jobs.png", full_page=True)
    page.goto(live.url + f"/flows/{f.e}")
    node = page.locator(f'svg.graph .node[data-id="{f.e}"]')
    expect(node).to_have_attribute("data-state", "waiting")
    page.evaluate("window.stillHere = true")
    live.call(live.client.abort, f.blocker)
    expect(node).to_have_attribute("data-state", "dead", timeout=20_000)  # refreshed in place
    assert page.evaluate("window.stillHere") is True
    assert watched.errors == []  # no script error, nothing blocked by the CSP

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    for name, path in (("flow", f"/flows/{f.c}"), ("group", f"/groups/{f.group}")):
        small.goto(live.url + path)
        small.screenshot(path=SHOTS / f"phone-{name}.png", full_page=True)
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"{name} is {width}px wide on a phone"
    phone.close()
