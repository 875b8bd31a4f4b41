"""The run times of a queue's page in a real headless Chromium: the hour's and the
day's p50, p95, p99 and slowest bucket, and the hour's histogram drawn as SVG bars."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from tests.test_run_times import finish_with_run_times
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_the_queue_page_shows_the_run_times(site: Site, tab: Tab) -> None:
    run_ms = [40] * 10 + [200] * 9 + [3000]
    site.call(finish_with_run_times, site.client, "render", run_ms, now_ms=int(time.time() * 1000))
    page = tab.page
    page.goto(site.url + "/queues/render")
    section = page.locator("#run-times")
    expect(section.locator("h2")).to_have_text("Run times")
    for window in ("hour", "day"):
        row = section.locator(f"#run-times-{window}")
        expect(row.locator('td[data-label="Attempts"]')).to_have_text("20")
        expect(row.locator(".rt-p50")).to_have_text("≤ 58 ms")
        expect(row.locator(".rt-p95")).to_have_text("≤ 292 ms")
        expect(row.locator(".rt-p99")).to_have_text("≤ 3.33 s")
        expect(row.locator(".rt-max")).to_have_text("≤ 3.33 s")
    histogram = page.locator("#run-time-histogram")
    expect(histogram.locator("rect.ran")).to_have_count(3)  # the three buckets that counted
    expect(histogram.locator("title").first).to_have_text("≤ 58 ms: 10 attempts")
    expect(histogram.locator(".xlabels span").first).to_have_text("≤ 58 ms")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "queue-run-times.png", full_page=True)
    assert tab.errors == []


def test_a_queue_without_runs_says_so(site: Site, tab: Tab) -> None:
    site.call(site.client.enqueue, "idle")
    page = tab.page
    page.goto(site.url + "/queues/idle")
    row = page.locator("#run-times-hour")
    expect(row.locator('td[data-label="Attempts"]')).to_have_text("0")
    expect(row.locator(".rt-p50")).to_have_text("–")
    expect(page.locator("#run-time-histogram figcaption")).to_contain_text("none finished")
    assert tab.errors == []
