"""The fair keys of a queue's page in a real headless Chromium: the section lists the
keys with the largest backlog, a hostile key shows as text and runs no script, and one
key's limit set from its row's form is read back through ``client.admin``; a key's page
of jobs, opened from its row, lists them in turn order and links each to its page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from rota import JobSpec
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

HOSTILE = "<img/src=x/onerror=window.hit=1>\"'"


def test_the_fair_keys_section_and_one_action(site: Site, tab: Tab) -> None:
    counts = {"big": 6, HOSTILE: 3, "small": 1}
    site.call(
        site.client.enqueue_many,
        [
            JobSpec(name="tenant", args=(i,), fair_key=k)
            for k, n in counts.items()
            for i in range(n)
        ],
    )
    page = tab.page
    page.goto(site.url + "/queues/tenant")
    section = page.locator("#fair-keys")
    expect(section.locator("h2")).to_have_text("Fair keys")
    expect(section.locator("td.key")).to_have_text(["big", HOSTILE, "small"])
    assert page.evaluate("window.hit") is None  # the key is text, not markup
    row = section.locator("tr", has=page.locator("td.key", has_text="big"))
    row.get_by_label("limit of key big").fill("2")
    with page.expect_navigation():
        row.get_by_role("button", name="Set limit").click()
    expect(page.locator(".notice")).to_have_text("Key limit set.")
    assert page.url.startswith(site.url + "/queues/tenant")
    rows = {r.key: r for r in site.call(site.client.admin.fair.of, "tenant")}
    assert rows["big"].limit == 2
    expect(row.locator('td[data-label="Running / limit"]')).to_have_text("0 / 2")
    with page.expect_navigation():
        section.locator("tr").nth(2).get_by_role("button", name="Pause").click()
    rows = {r.key: r for r in site.call(site.client.admin.fair.of, "tenant")}
    assert rows[HOSTILE].paused and not rows["big"].paused
    expect(page.locator(".notice")).to_have_text("Fair key paused.")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "queue-fair-keys.png", full_page=True)
    assert tab.errors == []


def test_a_keys_jobs_opened_from_the_keys_table(site: Site, tab: Tab) -> None:
    specs = [JobSpec(name="by-key", args=(i,), fair_key=HOSTILE) for i in range(3)]
    ids = [job.id for job in site.call(site.client.enqueue_many, specs)]
    page = tab.page
    page.goto(site.url + "/queues/by-key")  # a name of its own: the site is shared
    with page.expect_navigation():
        page.get_by_label(f"jobs of key {HOSTILE}").click()
    expect(page.locator("#key-name")).to_have_text(HOSTILE)
    assert page.evaluate("window.hit") is None  # the key is text, not markup
    expect(page.locator("#key-summary")).to_contain_text("3 queued")
    rows = page.locator("table.key-jobs tbody tr")
    expect(rows.locator('td[data-label="Job"]')).to_have_text(ids)  # the next to run first
    with page.expect_navigation():
        rows.first.get_by_role("link", name=ids[0]).click()
    assert page.url == f"{site.url}/jobs/{ids[0]}"
    page.go_back()
    expect(page.locator("#key-name")).to_have_text(HOSTILE)
    page.screenshot(path=SHOTS / "queue-fair-key-jobs.png", full_page=True)
    assert tab.errors == []
