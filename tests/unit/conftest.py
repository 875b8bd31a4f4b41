"""The unit tier: tests that need no Redis server, which ``make check`` runs first so that
a broken build fails in seconds, before any server starts.

The tier stays so by a check, not by care: a test here that asks for a fixture that
starts a server fails at its setup, and one that starts a ``redis-server`` itself (the
suite's starter, :class:`rota.testing.embedded.RedisServer`, or any process whose program is a
Redis, Valkey or Sentinel server) fails when it tries. A test that needs a server
belongs in the files above ``tests/unit``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rota.testing import embedded

__all__ = ["SERVER_FIXTURES", "ServerRefused", "no_servers"]

#: The fixtures of tests/conftest.py that start a server or hand out one's URL or client.
SERVER_FIXTURES = frozenset(
    {
        "redis_servers",
        "redis_server",
        "redis_url",
        "redis_sync",
        "client",
        "fresh_redis_server",
        "aof_server",
        "full_redis_server",
    }
)

_PROGRAMS = ("redis-server", "valkey-server", "redis-sentinel", "valkey-sentinel")


class ServerRefused(RuntimeError):
    """A unit test tried to start a Redis server."""


def _program(args: Any) -> str:
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
    return os.path.basename(os.fsdecode(argv[0])) if argv else ""


@contextmanager
def no_servers() -> Iterator[None]:
    """Within: starting a Redis server raises :class:`ServerRefused`."""
    popen_init = subprocess.Popen.__init__

    def start(self: embedded.RedisServer) -> None:
        raise ServerRefused("a unit test starts no redis-server: move it out of tests/unit")

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        program = _program(args)
        if options.get("executable") is not None:  # the program run; args[0] is its name
            program = os.path.basename(os.fsdecode(options["executable"]))
        if program.startswith(_PROGRAMS):
            raise ServerRefused(f"a unit test runs no {program}: move it out of tests/unit")
        popen_init(self, args, *rest, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedded.RedisServer, "start", start)
        patch.setattr(subprocess.Popen, "__init__", init)
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    asked = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if asked:
        pytest.fail(
            f"{item.nodeid} asks for {', '.join(sorted(asked))}: a unit test needs no"
            " Redis server; move it out of tests/unit",
            pytrace=False,
        )
    with no_servers():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with no_servers():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with no_servers():
        return (yield)
