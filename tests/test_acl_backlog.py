"""The read-only functions ``backlog`` and ``run_times`` under the web roles' own rules:
the ``web`` user counts the jobs of ``/shards`` and of the scrape's ranking by
``FCALL_RO`` of ``backlog``, and reads the run times a scrape details
(``/metrics?run_times=``) by ``FCALL_RO`` of ``run_times``; a user whose older rules lack
them reads the same figures by plain commands, its client still calling functions (a
refused read never turns it to ``EVALSHA``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from rota import Client, JobSpec, Settings
from rota.acl import rules
from rota.protocol.run_times import slot_of
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
    """Calls of ``FCALL_RO`` so far (of either function), and those refused."""
    stats: dict[str, Any] = server.client().info("commandstats")
    row = stats.get("cmdstat_fcall_ro", {})
    return int(row.get("calls", 0)), int(row.get("rejected_calls", 0))


async def _get(settings: Settings, *paths: str) -> list[httpx.Response]:
    """The answers of the web UI run with ``settings`` to ``paths``, each checked."""
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        got = [await http.get(path) for path in paths]
        assert all(r.status_code == 200 for r in got), [r.text for r in got]
        assert app.state.rota.client.admin.shards[0].script_mode.functions
        return got


async def _shards_and_ranking(settings: Settings) -> tuple[int, str]:
    shards, scrape = await _get(settings, "/api/shards", "/metrics")
    return sum(s["queued"] for s in shards.json()["shards"]), scrape.text


@pytest.mark.parametrize("older", [False, True], ids=["web", "older-web-operator"])
async def test_the_web_roles_count_by_the_function_or_by_commands(
    server: RedisServer, namespace: str, admin: Client, older: bool
) -> None:
    """The web role counts by the function: /shards, then the scrape's ranking. Rules
    without it (an older web-operator) are refused, then read the same by commands."""
    server.client().config_resetstat()
    settings = (
        _older(server, "web-operator", namespace)
        if older
        else settings_for(server, "web", namespace)
    )
    queued, scrape = await _shards_and_ranking(settings)
    assert queued == 30 and "rota_queued_jobs{namespace=" in scrape
    assert _backlog_calls(server) == ((0, 2) if older else (2, 0))


def _older(server: RedisServer, role: str, namespace: str) -> Settings:
    """Settings of a user of ``role`` whose rules lack the read-only functions."""
    user, password = f"older-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    older = [r for r in rules(role, namespace) if not r.startswith("+fcall_ro|")]
    server.client().execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *older
    )
    return pool_settings(server.url, namespace, redis_username=user, redis_password=password)


async def _run_time_lines(settings: Settings) -> list[str]:
    """The run-time series of a scrape with the day's run times."""
    (scrape,) = await _get(settings, "/metrics?run_times=day")
    return [line for line in scrape.text.splitlines() if line.startswith("rota_job_run_")]


async def test_the_web_role_reads_run_times_by_the_function_and_older_rules_by_commands(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    slot = slot_of(datetime.fromtimestamp(time.time(), UTC))
    k = admin.admin.shards[0].keys
    server.client().hset(k.run_times("n1", slot), mapping={"5": 3, "9": 1})
    server.client().hset(k.run_times("n3", slot), mapping={"0": 2})
    server.client().config_resetstat()
    by_function = await _run_time_lines(settings_for(server, "web", namespace))
    assert _backlog_calls(server) == (2, 0)  # the ranking's backlog, then the run times
    assert f'rota_job_run_time_attempts{{name="n1",namespace="{namespace}"}} 4.0' in by_function
    server.client().config_resetstat()
    assert await _run_time_lines(_older(server, "web", namespace)) == by_function
    assert _backlog_calls(server) == (0, 2)  # both refused, then read by commands
