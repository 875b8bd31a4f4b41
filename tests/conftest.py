"""Shared fixtures: private Redis servers, never the default one on 6379."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from rota import Client
from rota.testing.embedded import refusing_port
from tests import servers
from tests.redis_server import RedisServer

pytest_plugins = ["tests.matrix", "tests.order"]


@pytest.fixture(scope="session")
def redis_servers() -> Iterator[dict[str, RedisServer]]:
    """The shared private redis-servers of this test process by server binary: the
    suite's own and, in the server matrix (tests/matrix.py), one per other server."""
    started: dict[str, RedisServer] = {}
    try:
        yield started
    finally:
        for server in started.values():
            server.close()


@pytest.fixture(scope="session")
def redis_server(
    request: pytest.FixtureRequest, redis_servers: dict[str, RedisServer]
) -> RedisServer:
    """One private redis-server shared by the whole test run (of this process); a test
    of the server matrix gets the one of its server."""
    binary = servers.matrix_binary(getattr(request, "param", servers.DEFAULT))
    if binary not in redis_servers:
        redis_servers[binary] = RedisServer(binary=binary or None)
    return redis_servers[binary]


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def namespace() -> str:
    """A fresh key namespace per test, so tests never need to flush."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def redis_sync(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def fresh_redis_server() -> Iterator[RedisServer]:
    """A private redis-server for one test, free to be killed or restarted."""
    server = RedisServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def aof_server() -> Iterator[RedisServer]:
    """A private redis-server whose every acknowledged write survives a SIGKILL (an
    append-only file with ``appendfsync always``): kill it, start it again."""
    server = RedisServer(extra_args=["--appendonly", "yes", "--appendfsync", "always"])
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def full_redis_server() -> Iterator[RedisServer]:
    """A private redis-server with ``maxmemory-policy noeviction`` for one test, to be
    pushed over its memory limit with :func:`tests.helpers.fill_up`."""
    server = RedisServer(["--maxmemory-policy", "noeviction"])
    try:
        yield server
    finally:
        server.close()


#: How many shards the tests' namespaces span (``ROTA_TEST_SHARDS``; ``make test`` runs a
#: short selection again with 4): the client fixture and ``pool_settings`` use it.
SHARDS = int(os.environ.get("ROTA_TEST_SHARDS", "1"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if SHARDS > 1:
        for item in items:
            mark = item.get_closest_marker("one_shard")
            if mark:
                why = mark.args[0] if mark.args else "reads one shard's keys"
                item.add_marker(pytest.mark.skip(reason=f"{why} (ROTA_TEST_SHARDS={SHARDS})"))


@pytest.fixture
async def client(redis_url: str, namespace: str) -> AsyncIterator[Client]:
    c = Client.from_url(redis_url, namespace, shards=SHARDS)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def nowhere() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test: where a replica's
    primary is not (a port merely free could be another test's server by then)."""
    with refusing_port() as port:
        yield port
