"""``rota dead|retry|scheduled|waiting list|retry|delete`` as a user types them, on a real
Redis: the four groups behave alike, ids the set does not hold are named (exit 1), and
--limit/--offset are checked like the web API checks them (one line, exit 2)."""

from __future__ import annotations

import subprocess

import anyio
import pytest

from rota import Client, JobContext, WorkerPool
from tests.cli_helpers import rota_json, run_rota
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def _rota(*args: str) -> subprocess.CompletedProcess[str]:
    """``rota ARGS`` in a subprocess, from a thread: the test's event loop keeps running."""
    return run_rota(*args)


async def test_scheduled_list_run_now_and_delete(conn: tuple[str, ...], client: Client) -> None:
    jobs = [await client.enqueue_in(3600 + i, "nap", seconds=i) for i in range(4)]
    listed = await anyio.to_thread.run_sync(lambda: rota_json("scheduled", "list", *conn))
    assert listed["total"] == 4
    assert [j["id"] for j in listed["jobs"]] == [j.id for j in jobs]  # the soonest first
    text = (await anyio.to_thread.run_sync(_rota, "scheduled", "list", *conn)).stdout
    assert text.startswith("# scheduled jobs 1-4 of 4\nid\tname\trun at\tenqueued\n")

    done = await anyio.to_thread.run_sync(_rota, "scheduled", "retry", jobs[0].id, *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "retried 1 jobs")
    record = await client.job(jobs[0].id)
    assert record is not None and record.state == "queued"

    done = await anyio.to_thread.run_sync(_rota, "scheduled", "delete", jobs[1].id, "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 1 jobs")
    assert await client.job(jobs[1].id) is None

    # --all off a terminal: no prompt once -y is given
    done = await anyio.to_thread.run_sync(_rota, "scheduled", "retry", "--all", "-y", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "retried 2 jobs")
    assert (await client.admin.job_set_sizes())["scheduled"] == 0
    (q,) = await client.admin.queues(["nap"])
    assert q.size == 3


async def test_retry_set_list_run_now_and_delete(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(max_fails=5, backoff=lambda n: 3600.0)
    async def flaky(ctx: JobContext, n: int) -> None:
        raise ConnectionError(f"attempt {ctx.attempt} of {n} refused")

    jobs = [await client.enqueue("flaky", n=i) for i in range(3)]
    async with pool.running():
        await wait_until(lambda: _sizes_are(client, retry=3))

    listed = await anyio.to_thread.run_sync(lambda: rota_json("retry", "list", *conn))
    assert listed["total"] == 3
    assert {j["id"] for j in listed["jobs"]} == {j.id for j in jobs}
    assert all(j["state"] == "retry" and j["failures"] == 1 for j in listed["jobs"])
    text = (await anyio.to_thread.run_sync(_rota, "retry", "list", *conn)).stdout
    assert "next attempt" in text and "refused" in text

    done = await anyio.to_thread.run_sync(_rota, "retry", "retry", jobs[0].id, *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "retried 1 jobs")
    record = await client.job(jobs[0].id)
    assert record is not None and record.state == "queued"
    done = await anyio.to_thread.run_sync(_rota, "retry", "delete", "--all", "--yes", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 2 jobs")
    assert await _sizes_are(client, retry=0)


async def _sizes_are(client: Client, **sizes: int) -> bool:
    have = await client.admin.job_set_sizes()
    return all(have[k] == v for k, v in sizes.items())


async def test_ids_the_set_does_not_hold_are_named_and_exit_1(
    conn: tuple[str, ...], client: Client
) -> None:
    later = await client.enqueue_in(3600, "nap")
    done = await anyio.to_thread.run_sync(_rota, "dead", "retry", "nosuchid", *conn)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == "rota: not in the dead set: nosuchid"

    # the ids it holds are acted on, the others named
    done = await anyio.to_thread.run_sync(
        _rota, "scheduled", "retry", later.id, "gone1", "gone2", *conn
    )
    assert (done.returncode, done.stdout.strip()) == (1, "retried 1 jobs")
    assert done.stderr.strip() == "rota: not in the scheduled set: gone1 gone2"
    record = await client.job(later.id)
    assert record is not None and record.state == "queued"

    done = await anyio.to_thread.run_sync(_rota, "waiting", "delete", later.id, "-y", *conn)
    assert done.returncode == 1
    assert done.stderr.strip() == f"rota: not in the waiting set: {later.id}"
    record = await client.job(later.id)  # a queued job is not deleted from another set
    assert record is not None and record.state == "queued"


async def test_an_empty_page_says_so(conn: tuple[str, ...], client: Client) -> None:
    done = await anyio.to_thread.run_sync(_rota, "dead", "list", *conn)
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "# no dead jobs")
    await client.enqueue_in(60, "nap")
    done = await anyio.to_thread.run_sync(_rota, "scheduled", "list", "--offset", "10", *conn)
    assert done.stdout.splitlines()[0] == "# scheduled jobs: none from 11 (of 1)"


def test_every_set_has_the_same_commands() -> None:
    for which, commands in (
        ("dead", ("list", "retry", "delete")),
        ("retry", ("list", "retry", "delete")),
        ("scheduled", ("list", "retry", "delete")),
        ("waiting", ("list", "delete")),
    ):
        done = run_rota(which, "--help")
        assert done.returncode == 0
        listed = done.stdout.split("Commands:")[1].split()
        assert set(commands) <= set(listed), (which, listed)
        if which != "waiting":
            assert "-y, --yes" in run_rota(which, "delete", "--help").stdout
