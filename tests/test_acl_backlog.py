"""The read-only function ``backlog`` under the web roles' own rules: the ``web`` user
counts the jobs of ``/shards`` and of the scrape's ranking by ``FCALL_RO`` of it, and a
user whose older rules lack it reads the same figures by plain commands, its client
still calling functions (a refused read never turns it to ``EVALSHA``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from rota import Client, JobSpec
from rota.acl import rules
from rota.web import create_app
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.test_acl import server, settings_for

__all__ = ["server"]  # the module's server, whose Redis is 7 or newer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def admin(server: RedisServer, namespace: str) -> AsyncIterator[Client]:
    async with Client.from_url(server.url, namespace) as c:
        await c.enqueue_many([JobSpec(name=f"n{i}") for i in range(30)])  # loads the library
        yield c


def _backlog_calls(server: RedisServer) -> tuple[int, int]:
    """Calls of ``FCALL_RO`` so far, and those refused."""
    stats: dict[str, Any] = server.client().info("commandstats")
    row = stats.get("cmdstat_fcall_ro", {})
    return int(row.get("calls", 0)), int(row.get("rejected_calls", 0))


async def _shards_and_ranking(settings: Any) -> tuple[int, str]:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        shards = await http.get("/api/shards")
        scrape = await http.get("/metrics")
        assert shards.status_code == scrape.status_code == 200, (shards.text, scrape.text)
        assert app.state.rota.client.admin.shards[0].script_mode.functions
        return sum(s["queued"] for s in shards.json()["shards"]), scrape.text


async def test_the_web_role_counts_by_the_function(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    server.client().config_resetstat()
    queued, scrape = await _shards_and_ranking(settings_for(server, "web", namespace))
    assert queued == 30 and "rota_queued_jobs{namespace=" in scrape
    assert _backlog_calls(server) == (2, 0)  # /shards, then the scrape's ranking


async def test_rules_without_the_function_read_the_same_by_commands(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    user, password = f"older-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    older = [r for r in rules("web-operator", namespace) if not r.startswith("+fcall_ro|")]
    server.client().execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *older
    )
    settings = pool_settings(server.url, namespace, redis_username=user, redis_password=password)
    server.client().config_resetstat()
    queued, scrape = await _shards_and_ranking(settings)
    assert queued == 30 and "rota_queued_jobs{namespace=" in scrape
    assert _backlog_calls(server) == (0, 2)  # refused, then read by commands
