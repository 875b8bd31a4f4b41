"""The finished jobs page in a real headless Chromium over a real server: hostile text in
a job's args and result is shown as text and never runs, sorting keeps the jobs; and the
read-only token views the page and searches by content. (Sync tests only: the module's
browser runs an event loop of its own.)"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import Browser, Dialog, expect

from rota import Client, Settings
from rota.web import Auth, create_app
from tests.web.live import IMG, SCRIPT, LiveServer
from tests.web.test_complete_page import READONLY, TOKEN, finish_jobs

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture
def live_complete(redis_url: str, namespace: str, settings: Settings) -> Iterator[str]:
    """A real server over the finished jobs, opened by two tokens (one read-only)."""
    with start_blocking_portal() as portal:
        client = Client.from_url(redis_url, namespace)
        try:
            portal.call(finish_jobs, client, redis_url, namespace)
            app = create_app(settings, auth=Auth(token=TOKEN, readonly_token=READONLY))
            with LiveServer(app) as server:
                yield server.url
        finally:
            portal.call(client.close)


def test_the_page_shows_hostile_text_as_text_in_chromium(
    live_complete: str, browser: Browser
) -> None:
    context = browser.new_context(extra_http_headers={"authorization": f"Bearer {READONLY}"})
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(live_complete + "/complete?name=echo")
    page.wait_for_load_state("load")
    row = page.locator("tr", has=page.locator('a[href="/jobs/e07"]'))
    expect(row).to_contain_text(SCRIPT)
    expect(row).to_contain_text(IMG)
    assert page.locator("img[src=x]").count() == 0 and dialogs == []
    # Sorting the page by run time keeps the same jobs.
    page.locator("th a", has_text="Run time").click()
    expect(page.locator('a[href="/jobs/e07"]')).to_have_count(1)
    context.close()


def test_the_read_only_credential_views_the_finished_jobs(live_complete: str) -> None:
    look = {"authorization": f"Bearer {READONLY}"}
    page = httpx.get(live_complete + "/complete", headers=look)
    assert page.status_code == 200 and "e19" in page.text
    api = httpx.get(live_complete + "/api/complete?q=order+42&fields=content", headers=look)
    assert api.status_code == 200 and api.json()["total"] == 0  # c42 is dead, not complete
    dead = httpx.get(live_complete + "/api/dead?q=order+42&fields=content", headers=look)
    assert dead.status_code == 200 and [j["id"] for j in dead.json()["jobs"]] == ["c42"]
