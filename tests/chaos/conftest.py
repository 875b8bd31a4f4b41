"""Fixtures of the chaos suite: a private Redis, a ledger and the worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.chaos.harness import Chaos, Fleet, Ledger
from tests.redis_server import RedisServer


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.txt")


@pytest.fixture
def fleet(tmp_path: Path, ledger: Ledger) -> Iterator[Fleet]:
    """Worker processes; every one still running is killed when the test ends."""
    f = Fleet(tmp_path, ledger)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def r(fresh_redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = fresh_redis_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def aof_chaos(
    aof_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger
) -> Iterator[Chaos]:
    """A chaos run on a Redis whose every acknowledged write survives a SIGKILL, to be
    killed and started again (``tests.chaos.disrupt.restart``); its client waits up to
    5 s for an answer."""
    client = aof_server.client(socket_timeout=5)
    try:
        yield Chaos(aof_server.url, client, namespace, fleet, ledger)
    finally:
        client.close()


@pytest.fixture
def chaos(
    fresh_redis_server: RedisServer, r: redis.Redis, namespace: str, fleet: Fleet, ledger: Ledger
) -> Chaos:
    return Chaos(fresh_redis_server.url, r, namespace, fleet, ledger)
