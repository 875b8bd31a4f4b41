"""The operator's console in a real headless Chromium: enqueue from the form (bad JSON
answered with the client's words, as typed and as sent; good JSON makes a job),
duplicate a job, edit a dead job's args then retry it (a pool runs it with them), run
a periodic job now, and order and cut a job set by time. A real server on a loopback
port, real Redis, a real pool; screenshots go to artifacts/screenshots/."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser, Page, expect

from rota import JobContext, WorkerPool
from tests.helpers import pool_settings
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _pool(site: Site) -> WorkerPool:
    """``fix`` dies unless its label is "good"; ``nightly`` runs on new year's day."""
    settings = pool_settings(
        site.redis_url, site.namespace, heartbeat_interval=0.2, keep_result=600
    )
    pool = WorkerPool(settings=settings)

    @pool.job(max_fails=1)
    async def fix(label: str) -> str:
        if label != "good":
            raise ValueError(f"bad label {label}")
        return "fixed"

    @pool.periodic("0 0 1 1 *", name="nightly", kwargs={"scope": "all"})
    async def nightly(ctx: JobContext, scope: str) -> str:
        return scope

    return pool


def _job_of(page: Page, site: Site) -> str:
    assert page.url.startswith(site.url + "/jobs/"), page.url
    return page.url.removeprefix(site.url + "/jobs/").split("?")[0]


def test_enqueue_from_the_form_then_duplicate(site: Site, tab: Tab, browser: Browser) -> None:
    page = tab.page
    page.goto(site.url + "/")
    with page.expect_navigation():
        page.get_by_role("link", name="Enqueue", exact=True).click()
    page.get_by_label("Job name").fill("mailer")
    args = page.get_by_label("Args (JSON)")
    args.fill('{"to": "ada", "note": "<script>alert(1)</script>",')
    expect(page.locator("#f-args-check")).to_contain_text("not JSON")  # as typed
    expect(args).to_have_attribute("aria-invalid", "true")
    with page.expect_navigation():
        page.get_by_role("button", name="Enqueue").click()
    expect(page.locator("#form-error")).to_contain_text("args: it is not JSON")  # as sent
    expect(page.get_by_label("Args (JSON)")).to_have_value(
        '{"to": "ada", "note": "<script>alert(1)</script>",'
    )
    assert site.call(site.client.admin.names) == []
    page.get_by_label("Args (JSON)").fill('{"to": "ada", "note": "<script>alert(1)</script>"}')
    expect(page.locator("#f-args-check")).to_have_text("valid JSON")
    page.get_by_label("Max fails").fill("2")
    with page.expect_navigation():
        page.get_by_role("button", name="Enqueue").click()
    expect(page.locator(".notice")).to_have_text("Job enqueued.")
    first = _job_of(page, site)
    record = site.record(first)
    assert (record.name, record.max_fails) == ("mailer", 2)
    assert record.args == '{"to":"ada","note":"<script>alert(1)</script>"}'
    SHOTS.mkdir(parents=True, exist_ok=True)

    with page.expect_navigation():
        page.locator("#duplicate").click()
    expect(page.get_by_label("Job name")).to_have_value("mailer")
    expect(page.get_by_label("Max fails")).to_have_value("2")
    expect(page.get_by_label("Args (JSON)")).to_contain_text("<script>alert(1)</script>")
    page.screenshot(path=SHOTS / "enqueue-duplicate.png", full_page=True)
    with page.expect_navigation():
        page.get_by_role("button", name="Enqueue").click()
    copy = _job_of(page, site)
    assert copy != first
    assert site.record(copy).args == record.args
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    for path in (f"/enqueue?from={first}", f"/jobs/{first}/edit"):
        small.goto(site.url + path)
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"{path} is {width}px wide on a phone"
    small.screenshot(path=SHOTS / "phone-enqueue.png", full_page=True)
    phone.close()
    assert [e for e in tab.errors if "status of 422" not in e] == []  # the refusal's


def test_edit_a_dead_job_then_retry_it_and_run_a_periodic_job_now(site: Site, tab: Tab) -> None:
    page = tab.page
    job = site.call(site.client.enqueue, "fix", label="typo")
    with site.portal.wrap_async_context_manager(_pool(site).running()):
        page.goto(site.url + f"/jobs/{job.id}")
        expect(page.locator(".badge.st-dead")).to_be_visible(timeout=15_000)
        with page.expect_navigation():
            page.locator("#edit-retry").click()
        editor = page.get_by_label("Args (JSON)")
        expect(editor).to_contain_text('"label": "typo"')
        editor.fill('{"label": "good"}')
        page.screenshot(path=SHOTS / "edit-retry.png", full_page=True)
        with page.expect_navigation():
            page.get_by_role("button", name="Retry with these args").click()
        expect(page.locator(".notice")).to_contain_text("Args replaced")
        assert _job_of(page, site) == job.id
        expect(page.locator(".badge.st-complete")).to_be_visible(timeout=15_000)  # it refreshes
        record = site.record(job.id)
        assert (record.state, record.result, record.args) == (
            "complete",
            '"fixed"',
            '{"label":"good"}',
        )

        page.goto(site.url + "/cron")
        expect(page.locator("td", has_text="nightly")).to_be_visible()
        with page.expect_navigation():
            page.get_by_role("button", name="Run now").click()
        assert tab.dialogs[-1].startswith("Enqueue one run of nightly now?")
        expect(page.locator(".notice")).to_contain_text("One run of the periodic job enqueued")
        run = _job_of(page, site)
        assert run.startswith("cron:nightly:")
        expect(page.locator(".badge.st-complete")).to_be_visible(timeout=15_000)
        assert site.record(run).result == '"all"'
    assert tab.errors == []


def test_a_set_ordered_by_time_and_cut_to_a_window(site: Site, tab: Tab) -> None:
    base = 2_000_000_040  # 2033-05-18T03:34:00Z: a whole minute, as a date field says
    ids = [site.call(site.client.enqueue_at, base + 86400 * i, "report", i).id for i in range(4)]
    page = tab.page
    page.goto(site.url + "/scheduled")

    def shown() -> list[str]:
        links = page.locator("table.jobs tbody td.mono a").all()
        return [str(a.get_attribute("href")).removeprefix("/jobs/") for a in links]

    assert shown() == ids
    with page.expect_navigation():
        page.locator("#sort-time").click()
    assert shown() == ids[::-1]
    day = datetime.fromtimestamp(base + 86400, UTC)
    page.get_by_label("Runs at from (UTC)").fill(day.strftime("%Y-%m-%dT%H:%M"))
    later = datetime.fromtimestamp(base + 2 * 86400, UTC)
    page.get_by_label("Runs at to (UTC)").fill(later.strftime("%Y-%m-%dT%H:%M"))
    with page.expect_navigation():
        page.get_by_role("button", name="Show").click()
    assert shown() == [ids[2], ids[1]]  # still newest first
    expect(page.locator(".summary").first).to_contain_text("2 jobs")
    page.screenshot(path=SHOTS / "scheduled-window.png", full_page=True)
    with page.expect_navigation():
        page.locator("#sort-time").click()
    assert shown() == [ids[1], ids[2]]  # the window kept, oldest first
    assert tab.errors == []
