"""Quiet, resume and stop pools from the pools page, in a real headless Chromium: each
button asks first, the pool obeys at its heartbeat, and the page shows its state as it
refreshes by itself (quiet, running, stopping, then gone). A real server on a loopback
port, real Redis, a real pool; screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import pytest
from playwright.sync_api import Page, expect

from rota import JobContext, WorkerPool
from tests.helpers import pool_settings
from tests.web.conftest import Site, Tab
from tests.web.test_browser import SHOTS

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

#: Long enough for a page refresh (every 5 s) and a heartbeat or two.
SEEN = 20_000


class Held:
    """A pool whose ``hold`` jobs run until ``release`` is set, running in the portal."""

    def __init__(self, where: Site) -> None:
        self.site = where
        self.pool = WorkerPool(
            settings=pool_settings(
                where.redis_url, where.namespace, heartbeat_interval=0.2, grace=60.0
            )
        )
        self.release, self.leave, self.ended = where.call(lambda: _events(3))
        self.id = ""

        @self.pool.job
        async def hold(ctx: JobContext) -> None:
            await self.release.wait()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with self.pool.running() as rt:
            self.id = rt.pool_id
            task_status.started()
            await self.leave.wait()
        self.ended.set()


async def _events(n: int) -> list[anyio.Event]:
    return [anyio.Event() for _ in range(n)]


def _click(page: Page, scope: Any, name: str) -> None:
    """Click a row's button (its question answered yes), then leave the table: the page
    does not refresh under the pointer."""
    with page.expect_navigation():
        scope.get_by_role("button", name=name).click()
    page.mouse.move(0, 0)


def test_quiet_resume_and_stop_from_the_pools_page(site: Site, tab: Tab) -> None:
    held = Held(site)
    site.portal.start_task(held.run)
    try:
        page = tab.page
        page.goto(site.url + "/pools")
        row = page.locator(f'tr[data-pool="{held.id}"]')
        state = row.locator("td.pool-state .badge")
        expect(state).to_have_text("running")

        _click(page, row, "Quiet")
        assert tab.dialogs[-1].startswith(f"Make pool {held.id} quiet?")
        expect(page.locator(".notice")).to_have_text(
            "1 pools told to be quiet: each says so once it obeys."
        )
        expect(state).to_have_text("quiet", timeout=SEEN)
        expect(row.get_by_role("button", name="Resume")).to_be_visible()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "pools-quiet.png", full_page=True)

        _click(page, row, "Resume")
        expect(state).to_have_text("running", timeout=SEEN)

        # a job the stopping pool waits for, then every pool of the host told to stop
        job = site.call(site.client.enqueue, "hold")
        expect(row.locator("td.num").nth(1)).to_have_text("1 / 10", timeout=SEEN)
        host = page.locator(f'tr[data-host="{socket.gethostname()}"]')
        _click(page, host, "Stop")
        assert tab.dialogs[-1].startswith(f"Stop every pool of {socket.gethostname()}?")
        expect(state).to_have_text("stopping", timeout=SEEN)
        expect(row.get_by_role("button")).to_have_count(0)  # a stop is final
        page.screenshot(path=SHOTS / "pools-stopping.png", full_page=True)
        site.portal.call(held.release.set)
        site.portal.call(held.ended.wait)
        expect(page.locator('[data-live="pools"] .empty')).to_have_text(
            "No live worker pools.", timeout=SEEN
        )
        assert site.state(job.id) is None  # it completed (and was not kept)
        assert tab.errors == []
    finally:
        site.portal.call(held.release.set)
        site.portal.call(held.leave.set)
        site.portal.call(held.ended.wait)
