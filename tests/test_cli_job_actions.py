"""``rota job front|delete``, ``rota retry kill`` and ``rota <set> clean --older-than`` as
a user types them, on a real Redis: each says what it did, a job that moved on is named
with exit code 1, a bad age is one line with exit code 2."""

from __future__ import annotations

import subprocess

import anyio
import pytest

from rota import Client
from tests.cli_helpers import rota_env, run_rota
from tests.conftest import SHARDS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


async def _rota(*args: str) -> subprocess.CompletedProcess[str]:
    """``rota ARGS`` in a subprocess over the tests' shards, from a thread."""
    env = rota_env(ROTA_SHARDS=str(SHARDS))
    return await anyio.to_thread.run_sync(lambda: run_rota(*args, env=env))


async def _to_retry(client: Client, name: str) -> str:
    """A job of ``name`` in the retry set, as a failed attempt leaves it."""
    job = await client.enqueue(name)
    shard = await client.admin.shard_holding(job.id)
    await shard.redis.lrem(shard.keys.queue(name), 0, job.id)
    await shard.redis.hset(shard.keys.job(job.id), mapping={"state": "retry", "error": "E"})
    await shard.redis.zadd(shard.keys.retry, {job.id: 4102444800000})
    return job.id


async def test_front_and_delete_a_queued_job(conn: tuple[str, ...], client: Client) -> None:
    ids = [(await client.enqueue("mail", n=i)).id for i in range(2)]
    done = await _rota("job", "front", ids[1], *conn)
    assert (done.returncode, done.stdout.strip()) == (0, f"{ids[1]}: at the front of its queue")
    done = await _rota("job", "delete", ids[0], "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, f"deleted {ids[0]}")
    assert await client.job(ids[0]) is None
    done = await _rota("job", "front", ids[0], *conn)
    assert done.returncode == 1
    assert done.stderr.strip() == f"rota: job {ids[0]} is not queued: nothing done"


async def test_kill_names_the_ids_the_retry_set_does_not_hold(
    conn: tuple[str, ...], client: Client
) -> None:
    job_id = await _to_retry(client, "flaky")
    done = await _rota("retry", "kill", job_id, "gone1", "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (1, "killed 1 jobs")
    assert done.stderr.strip() == "rota: not in the retry set: gone1"
    record = await client.job(job_id)
    assert record is not None and (record.state, record.reason) == ("dead", "killed")


async def test_clean_by_age_and_its_refusals(conn: tuple[str, ...], client: Client) -> None:
    for _ in range(3):
        await client.enqueue_in(3600, "nap")
    done = await _rota("scheduled", "clean", "--older-than", "1d", "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 0 scheduled jobs")
    done = await _rota("scheduled", "clean", "--older-than", "0", "--name", "nap", "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 3 scheduled jobs")
    done = await _rota("complete", "clean", "--older-than", "7d", "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 0 complete jobs")
    for age, said in (
        ("nan", "'nan' is not a duration like 30s, 5m, 1h30m or 1d"),
        ("-1d", "'-1d' is not a duration like 30s, 5m, 1h30m or 1d"),
        ("1e300", "'1e300' is not a duration like 30s, 5m, 1h30m or 1d"),
        ("99999d", "--older-than: must be from 0 to 315360000, got 8639913600.0"),
    ):
        done = await _rota("dead", "clean", "--older-than", age, "-y", *conn)
        assert done.returncode == 2, age
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr
