"""``rota job show|abort``, ``rota queue pause|limit``, ``rota enqueue`` arguments and
``rota worker`` flags, as a user types them, on a real Redis."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from rota import Client, JobContext, WorkerPool
from rota.cli import main
from tests.cli_helpers import rota_env, rota_json, run_rota, start_worker
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(120)

NOWHERE = ("--redis-url", "redis://127.0.0.1:1/0")  # refused before a connection is tried


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def _rota(*args: str) -> subprocess.CompletedProcess[str]:
    return run_rota(*args)


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


async def test_job_show_prints_the_lines_of_ctx_log(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))

    @pool.job
    async def report(ctx: JobContext, day: str) -> None:
        await ctx.job_log(f"report for {day}: started")
        await ctx.job_log("42 rows written")

    job = await client.enqueue("report", day="monday")
    async with pool.running():
        await wait_until(lambda: _state_is(client, job.id, "complete"))
    data = await anyio.to_thread.run_sync(lambda: rota_json("job", "show", job.id, *conn))
    assert data["logs"] == ["report for monday: started", "42 rows written"]
    text = (await anyio.to_thread.run_sync(_rota, "job", "show", job.id, *conn)).stdout
    assert "         log  report for monday: started\n              42 rows written\n" in text


async def _state_is(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_job_abort(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    queued = await client.enqueue("nap")
    done = await anyio.to_thread.run_sync(_rota, "job", "abort", queued.id, *conn)
    assert (done.returncode, done.stdout.strip()) == (0, f"aborted {queued.id} (was queued)")
    assert await _state_is(client, queued.id, "aborted")
    again = await anyio.to_thread.run_sync(_rota, "job", "abort", queued.id, *conn)
    line = _one_line(again, 1)
    assert line == f"rota: job {queued.id} is already aborted: nothing to abort"
    missing = await anyio.to_thread.run_sync(_rota, "job", "abort", "nosuchid", *conn)
    assert _one_line(missing, 1) == "rota: no job nosuchid"

    # a running job, in a worker process: its pool cancels it
    env = rota_env(ROTA_REDIS_URL=redis_url, ROTA_NAMESPACE=namespace, ROTA_KEEP_RESULT="600")
    proc = start_worker("tests.cli_app:pool", env=env)
    try:
        running = await client.enqueue("nap", seconds=60)
        await wait_until(lambda: _state_is(client, running.id, "running"), within=30)
        done = await anyio.to_thread.run_sync(_rota, "job", "abort", running.id, *conn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"abort requested: {running.id} was running")
        await wait_until(lambda: _state_is(client, running.id, "aborted"), within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(_stop, proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def test_queue_limit_set_and_cleared(conn: tuple[str, ...], client: Client) -> None:
    await client.enqueue("nap")
    done = await anyio.to_thread.run_sync(_rota, "queue", "limit", "nap", "3", *conn)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "nap: at most 3 at once", "")
    (q,) = await client.admin.queues(["nap"])
    assert q.limit == 3
    done = await anyio.to_thread.run_sync(_rota, "queue", "limit", "nap", "--clear", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "nap: no limit")
    (q,) = await client.admin.queues(["nap"])
    assert q.limit is None


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("queue", "pause", "bad name"), "rota: invalid job name 'bad name'"),
        (("queue", "resume", "bad name"), "rota: invalid job name 'bad name'"),
        (("queue", "clear", "x/y", "-y"), "rota: invalid job name 'x/y'"),
        (("queue", "limit", "nap", "0"), "rota: N: must be at least 1, got 0"),
        (("queue", "limit", "nap", "lots"), "rota: N: expected an integer, got 'lots'"),
        (("enqueue", "nap", "1st=2"), "rota: '1st=2': the key '1st' is not a parameter name"),
        (("enqueue", "nap", "a=1", "a=2"), "rota: 'a=2': a is given twice"),
        (("enqueue", "nap", "a-b=1"), "rota: 'a-b=1': the key 'a-b' is not a parameter name"),
        (("worker", "tests.cli_app:pool", "-c", "0"), "rota: --concurrency: must be from 1 to"),
        (("worker", "tests.cli_app:pool", "--lease", "2s"), "rota: --lease: must be longer"),
        (("worker", "tests.cli_app:pool", "--lease", "soon"), "rota: --lease: 'soon' is not"),
        (("worker", "tests.cli_app:pool", "--grace", "-1"), "rota: --grace: '-1' is not"),
        (("worker", "tests.cli_app:pool", "--prefetch", "-1"), "rota: --prefetch: must be from 0"),
        (("status", "--namespace", "a{b}"), "rota: --namespace: "),
    ],
)
def test_refused_arguments_exit_2_with_one_line(
    args: tuple[str, ...],
    line: str,
    redis_url: str,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url: tuple[str, ...] = ("--redis-url", redis_url) if args[0] == "enqueue" else NOWHERE
    if "--namespace" not in args:
        url = (*url, "--namespace", namespace)
    assert main([*args, *url]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(line), err


async def test_pausing_a_name_never_seen_warns_and_pauses(
    conn: tuple[str, ...], client: Client
) -> None:
    done = await anyio.to_thread.run_sync(_rota, "queue", "pause", "nobody_knows_me", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "paused nobody_knows_me")
    assert done.stderr.startswith("rota: warning: no pool or job has used the name")
    (q,) = await client.admin.queues(["nobody_knows_me"])
    assert q.paused
    await client.enqueue("nap")
    known = await anyio.to_thread.run_sync(_rota, "queue", "pause", "nap", *conn)
    assert (known.returncode, known.stderr) == (0, "")


async def test_enqueue_values_and_naive_at_is_utc(conn: tuple[str, ...], client: Client) -> None:
    args = ("nap", "ver=1.10", 'tag="1.10"', "n=3", "to=ada", "--at", "2031-01-02T03:04:05")
    # a local time zone far from UTC: the time without an offset is UTC all the same
    env = rota_env(TZ="America/New_York")
    done = await anyio.to_thread.run_sync(
        lambda: run_rota("enqueue", *args, "--json", *conn, env=env)
    )
    assert done.returncode == 0, done.stderr
    record = await client.job(msgspec.json.decode(done.stdout)["id"])
    assert record is not None
    assert record.run_at == 1925089445
    assert record.args_value == {"ver": 1.1, "tag": "1.10", "n": 3, "to": "ada"}
    help_text = (await anyio.to_thread.run_sync(_rota, "enqueue", "--help")).stdout
    assert "as JSON when it parses as JSON" in help_text
    assert "quote it to keep a string" in help_text


async def test_worker_flags_reach_the_pool(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    help_text = run_rota("worker", "--help").stdout
    for flag in ("--lease", "--grace", "--prefetch", "(default 30s)", "(default 100)"):
        assert flag in help_text
    log = tmp_path / "worker.log"
    env = rota_env(ROTA_REDIS_URL=redis_url, ROTA_NAMESPACE=namespace, ROTA_LOG_FORMAT="json")
    flags = ("-c", "3", "--lease", "12s", "--grace", "1.5s", "--prefetch", "0")
    proc = start_worker("tests.cli_app:pool", *flags, env=env, log=log)
    try:
        await wait_until(lambda: _pool_concurrency_is(client, 3), within=30)
        # registered comes before started: a SIGTERM between them stops it undrained
        await wait_until(lambda: b'"pool started"' in log.read_bytes(), within=30)
        proc.send_signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30)) == 0
    finally:
        proc.kill()
        proc.wait()
    events = [msgspec.json.decode(line) for line in log.read_bytes().splitlines() if line]
    (draining,) = [e for e in events if e.get("event") == "pool draining"]
    assert draining["grace"] == 1.5


async def _pool_concurrency_is(client: Client, n: int) -> bool:
    return [p.concurrency for p in await client.admin.pools()] == [n]


def test_the_demo_jobs_import_from_the_installed_package(tmp_path: Path) -> None:
    """Outside the checkout (no ``examples`` package on the path), the demo's default
    app loads from the package itself: what ``pip install rota && rota demo`` needs."""
    code = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('examples') is None\n"
        "from rota.examples.demo import load_demo\n"
        "from rota.cli.run import demo\n"
        "app = next(p.default for p in demo.params if p.name == 'app')\n"
        "pool, sample = load_demo(app)\n"
        "name, kwargs = sample()\n"
        "assert name in pool.handlers, name\n"
        "print(app, sorted(pool.handlers))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=rota_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rota.examples.jobs:pool ['always_fails', 'flaky_webhook'")
