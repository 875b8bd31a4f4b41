"""The unit tier refuses a test that would start a Redis server (tests/unit/conftest.py)."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.redis_server import RedisServer
from tests.unit import conftest
from tests.unit.conftest import ServerRefused


def test_the_suites_redis_server_cannot_start_here() -> None:
    with pytest.raises(ServerRefused, match="a unit test starts no redis-server"):
        RedisServer()


def test_a_server_program_cannot_be_run_here() -> None:
    with pytest.raises(ServerRefused, match="a unit test runs no redis-server"):
        subprocess.Popen(["/usr/bin/redis-server", "--port", "0"])
    with pytest.raises(ServerRefused, match="a unit test runs no valkey-server"):
        subprocess.run(["valkey-server", "--version"], check=False)
    with pytest.raises(ServerRefused, match="a unit test runs no redis-sentinel"):
        subprocess.run("redis-sentinel --port 0", shell=True, check=False)
    with pytest.raises(ServerRefused, match="a unit test runs no redis-server"):
        subprocess.run(["server", "--port", "0"], executable="/usr/bin/redis-server", check=False)


def test_other_programs_run() -> None:
    done = subprocess.run(["true"], check=False)
    assert done.returncode == 0


def test_a_test_asking_for_a_server_fixture_fails_at_its_setup() -> None:
    item = cast(Any, SimpleNamespace(nodeid="t::x", fixturenames=["tmp_path", "redis_url"]))
    with pytest.raises(pytest.fail.Exception, match=r"t::x asks for redis_url: a unit test"):
        next(conftest.pytest_runtest_setup(item))
    fine = cast(Any, SimpleNamespace(nodeid="t::y", fixturenames=["tmp_path"]))
    setup = conftest.pytest_runtest_setup(fine)
    next(setup)  # let through: no server fixture
    setup.close()
