"""The UI of a read-only ACL user in a real headless Chromium: every page shows its data,
and a click on "Retry now" is refused by Redis and answered with a page that says why,
while the dead job stays where it was. A screenshot goes to artifacts/screenshots/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import Browser, Page, expect

from rota import Client
from rota.acl import rules
from rota.web import create_app
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.live import LiveServer
from tests.web.test_browser import SHOTS

# Slow (a headless Chromium): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


async def _seed(client: Client) -> str:
    job = await client.enqueue("mail", to="ada")
    keys = client.admin.shards[0].keys
    await client.admin.shards[0].redis.lrem(keys.queue("mail"), 0, job.id)
    await client.admin.shards[0].redis.hset(
        keys.job(job.id), mapping={"state": "dead", "error": "E: boom"}
    )
    await client.admin.shards[0].redis.zadd(keys.dead, {job.id: 1})
    return job.id


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def test_a_read_only_ui_shows_the_dead_job_and_says_why_it_cannot_retry(
    redis_server: RedisServer, page: Page
) -> None:
    namespace = "t" + uuid.uuid4().hex[:12]
    user, password = "web-" + uuid.uuid4().hex[:6], uuid.uuid4().hex
    redis_server.client().execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *rules("web", namespace)
    )
    settings = pool_settings(
        redis_server.url, namespace, redis_username=user, redis_password=password
    )
    with start_blocking_portal() as portal:
        admin = Client.from_url(redis_server.url, namespace)
        try:
            dead_id = portal.call(_seed, admin)
            with LiveServer(create_app(settings)) as server:
                page.goto(server.url + "/dead")
                row = page.locator("tr", has=page.locator(f'a[href="/jobs/{dead_id}"]'))
                expect(row).to_contain_text("boom")
                with page.expect_navigation():
                    row.get_by_role("button", name="Retry now").click()
                expect(page.locator("body")).to_contain_text("read-only role")
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=SHOTS / "read-only-refusal.png", full_page=True)
                page.goto(server.url + "/dead")
                expect(row).to_have_count(1)
            assert (
                portal.call(
                    admin.admin.shards[0].redis.zscore, admin.admin.shards[0].keys.dead, dead_id
                )
                == 1
            )
        finally:
            portal.call(admin.close)
