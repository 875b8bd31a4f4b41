"""The operator commands against a Redis that refuses writes: a private redis-server
pushed over its memory limit (``noeviction``), or made a read-only replica. Each command
that is refused prints one line, no traceback, and exits 1; reading still works."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import redis
import redis.exceptions

from rota.redis.outage import MEANING, Condition
from tests.cli_helpers import rota_env, run_rota
from tests.helpers import fill_up
from tests.redis_server import RedisServer

NS = "clifull"


@pytest.fixture
def server(full_redis_server: RedisServer) -> RedisServer:
    return full_redis_server


@pytest.fixture
def sync(server: RedisServer) -> Iterator[redis.Redis]:
    r = server.client()
    try:
        yield r
    finally:
        r.close()


def one_line(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The one line a refused command printed on stderr."""
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_enqueue_on_a_full_redis(server: RedisServer, sync: redis.Redis) -> None:
    conn = ("--redis-url", server.url, "--namespace", NS)
    first = run_rota("enqueue", "nap", "seconds=1", *conn)
    assert first.returncode == 0, first.stderr
    for i in range(100):
        sync.set(f"ballast:{i}", "x" * 1000)
    fill_up(sync)

    line = one_line(run_rota("enqueue", "nap", "seconds=2", *conn))
    assert line.startswith("rota: Redis refuses writes: out of memory: the job was not enqueued (")
    line = one_line(run_rota("enqueue", "nap", "--json", env=rota_env(ROTA_REDIS_URL=server.url)))
    assert MEANING[Condition.OUT_OF_MEMORY] in line
    # reading, and what frees memory, still work
    status = run_rota("status", "--json", *conn)
    assert status.returncode == 0, status.stderr
    assert run_rota("queue", "pause", "nap", *conn).returncode == 0
    shown = run_rota("job", "show", first.stdout.strip(), *conn)
    assert shown.returncode == 0, shown.stderr


def test_commands_on_a_read_only_replica(
    server: RedisServer, sync: redis.Redis, nowhere: int
) -> None:
    conn = ("--redis-url", server.url, "--namespace", NS)
    job_id = run_rota("enqueue", "nap", *conn).stdout.strip()
    p = "{" + NS + "}:"
    sync.hset(p + "job:dead1", mapping={"name": "nap", "args": "{}", "state": "dead"})
    sync.zadd(p + "dead", {"dead1": 1000})
    sync.replicaof("127.0.0.1", nowhere)
    with pytest.raises(redis.exceptions.ReadOnlyError, match="read only replica"):
        sync.set("probe", "x")

    read_only = MEANING[Condition.READ_ONLY]
    for args in [
        ("enqueue", "nap"),
        ("queue", "pause", "nap"),
        ("queue", "resume", "nap"),
        ("queue", "clear", "nap", "--yes"),
        ("dead", "retry", "dead1"),
        ("dead", "retry", "--all", "--yes"),
        ("dead", "delete", "dead1", "--yes"),
    ]:
        line = one_line(run_rota(*args, *conn))
        assert line.startswith(f"rota: {read_only}"), (args, line)
    # nothing changed, and reading works
    assert sync.zscore(p + "dead", "dead1") == 1000
    listed = run_rota("dead", "list", *conn)
    assert (listed.returncode, "dead1" in listed.stdout) == (0, True)
    assert run_rota("job", "show", job_id, *conn).returncode == 0
    assert run_rota("status", *conn).returncode == 0


def test_a_pool_whose_own_setup_fails_is_not_blamed_on_redis(server: RedisServer) -> None:
    """An OSError of the program's lifespan is its own: it is shown as it is, not as a
    Redis that cannot be reached (a wrong diagnosis sends the operator to Redis)."""
    done = run_rota("worker", "tests.cli_app:broken", env=rota_env(ROTA_REDIS_URL=server.url))
    assert done.returncode == 1, done.stderr
    assert "FileNotFoundError" in done.stderr and "rota-model.bin" in done.stderr
    assert MEANING[Condition.UNREACHABLE] not in done.stderr
