"""What ``rota`` prints for a mistake of usage (one line, exit code 2), for a job name
no pool registered (a warning, and the job all the same), and for a job that runs later
(when it runs)."""

from __future__ import annotations

import subprocess
import time

import anyio
import msgspec
import pytest

from rota import Client, JobContext, WorkerPool
from tests.cli_helpers import rota_env, run_rota
from tests.helpers import pool_settings


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def _rota(*args: str) -> subprocess.CompletedProcess[str]:
    return run_rota(*args)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("enqueue", "nap", "--foo"), "rota: error: No such option '--foo' (rota enqueue --help)"),
        (("enqueue",), "rota: error: Missing argument 'NAME' (rota enqueue --help)"),
        (("nosuch",), "rota: error: No such command 'nosuch' (rota --help)"),
        (
            ("status", "--watch", "x"),
            "rota: error: Invalid value for '--watch': 'x' is not a valid float"
            " (rota status --help)",
        ),
        (
            ("worker", "--processes", "0", "tests.cli_app:pool"),
            "rota: error: Invalid value for '--processes': 0 is not in the range 1<=x<=256"
            " (rota worker --help)",
        ),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args: tuple[str, ...], line: str) -> None:
    done = run_rota(*args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [line]


async def test_enqueue_warns_of_a_name_no_pool_registered(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    typo = await anyio.to_thread.run_sync(_rota, "enqueue", "npa", *conn)
    assert typo.returncode == 0, typo.stderr
    assert typo.stderr.splitlines() == [
        "rota: warning: no pool has registered the job name 'npa' (a typo?); enqueued"
        " anyway: it waits until a pool that handles it starts"
    ]
    job_id = typo.stdout.strip()
    record = await client.job(job_id)
    assert record is not None and record.name == "npa"  # enqueued all the same
    again = await anyio.to_thread.run_sync(_rota, "enqueue", "npa", *conn)
    assert "no pool has registered the job name 'npa'" in again.stderr  # its job is no pool

    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def nap(ctx: JobContext) -> None:
        return None

    async with pool.running():
        pass
    known = await anyio.to_thread.run_sync(_rota, "enqueue", "nap", *conn)
    assert (known.returncode, known.stderr) == (0, "")


async def test_enqueue_in_or_at_says_when_the_job_runs(
    conn: tuple[str, ...], client: Client
) -> None:
    before = time.time()
    done = await anyio.to_thread.run_sync(_rota, "enqueue", "nap", "--in", "60000000", *conn)
    assert done.returncode == 0, done.stderr
    job_id, _, rest = done.stdout.strip().partition(" ")
    record = await client.job(job_id)
    assert record is not None and record.run_at is not None
    at = time.strftime("%Y-%m-%d %H:%M", time.gmtime(record.run_at))
    assert record.run_at >= before + 60000000
    assert rest.startswith(f"(runs at {at}:") and rest.endswith("+00:00, in 694d10h)"), rest

    at_json = await anyio.to_thread.run_sync(
        _rota, "enqueue", "nap", "--at", "2031-01-02T03:04:05+00:00", "--json", *conn
    )
    assert msgspec.json.decode(at_json.stdout)["run_at"] == 1925089445
    now = await anyio.to_thread.run_sync(_rota, "enqueue", "nap", *conn)
    assert " " not in now.stdout.strip()  # a job that runs now: its id alone


async def test_rota_local_time_as_readme_gives_it(conn: tuple[str, ...]) -> None:
    """README.md: ``ROTA_LOCAL_TIME=1`` is ``rota --local-time``, not an unknown setting."""
    later = await anyio.to_thread.run_sync(_rota, "enqueue", "nap", "--in", "1h", *conn)
    assert later.returncode == 0, later.stderr
    env = rota_env(ROTA_LOCAL_TIME="1", TZ="Asia/Tokyo", COLUMNS="200")
    done = await anyio.to_thread.run_sync(lambda: run_rota("scheduled", "list", *conn, env=env))
    assert done.returncode == 0, done.stderr
    assert "+09:00 JST" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (("nap", "--in", "soon"), "rota: error: Invalid value for --in: 'soon' is not a duration"),
        (("nap", "--in", "1s", "--at", "2031-01-01T00:00:00"), "rota: error: give --in or --at"),
        (("nap", "--at", "yesterday"), "rota: --at: 'yesterday' is not an ISO-8601 time"),
        (("bad!name",), "rota: invalid job name 'bad!name'"),
        (("nap", "a=1", "--args", "{}"), "rota: error: give args as KEY=VALUE pairs or --args"),
    ],
)
def test_what_enqueue_was_given_is_read_before_redis_is_reached(
    args: tuple[str, ...], told: str
) -> None:
    """A mistake in what was typed is told as itself, not as the Redis that cannot be
    reached (nothing listens on port 1)."""
    done = run_rota("enqueue", *args, "--redis-url", "redis://127.0.0.1:1/0")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(told), line
