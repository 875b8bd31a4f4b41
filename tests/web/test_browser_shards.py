"""The web UI over a namespace of four shards in Chromium (a module of its own: the
sync Playwright API runs an event loop of its own, which the async tests of
tests/web/test_shards_web.py must not meet in their thread)."""

from __future__ import annotations

import functools
import uuid

import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import Browser, expect

from rota import Client, JobSpec
from rota.protocol.shards import new_id_in, shard_tags
from rota.web import create_app
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.live import LiveServer

K = 4


@pytest.mark.slow
def test_the_pages_over_four_shards_in_a_browser(
    redis_server: RedisServer, browser: Browser
) -> None:
    """In Chromium: /shards has a row a shard, /queues and a job of shard 3 are whole."""
    url, namespace = redis_server.url, "t" + uuid.uuid4().hex[:12]
    with start_blocking_portal() as portal:
        client = Client.from_url(url, namespace, shards=K)
        try:
            portal.call(client.enqueue_many, [JobSpec(name="n") for _ in range(40)])
            job = portal.call(functools.partial(client.enqueue, "n", job_id=new_id_in(3, K)))
            app = create_app(pool_settings(url, namespace, shards=K))
            with LiveServer(app) as server:
                page = browser.new_page()
                page.goto(server.url + "/shards")
                expect(page.locator("main tbody tr")).to_have_count(K)
                for tag in shard_tags(namespace, K):
                    expect(page.locator("main")).to_contain_text("{" + tag + "}")
                page.goto(server.url + "/queues")
                expect(page.locator("main tbody tr").first).to_contain_text("41")
                response = page.goto(server.url + f"/jobs/{job.id}")
                assert response is not None and response.status == 200
                expect(page.locator("main")).to_contain_text(job.id)
                page.close()
        finally:
            portal.call(client.close)
