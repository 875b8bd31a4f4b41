"""Isolated handlers (``@pool.job(isolated=True)``) run in the pool's child processes.

The handlers live in tests/isolated_jobs.py, which each child imports by its path. A
timeout and an abort kill the child (reasons ``timeout``, ``aborted``); a child that
dies under its attempt ends it ``crashed``, and the pool goes on with a fresh child.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from rota import Client, JobFailed, WorkerPool
from rota.worker.isolation import Children
from tests import isolated_jobs as jobs
from tests.helpers import pool_settings, wait_until


def _pool(redis_url: str, namespace: str, **changes: Any) -> WorkerPool:
    values: dict[str, Any] = {"keep_result": 60, "child_processes": 2, **changes}
    return WorkerPool(settings=pool_settings(redis_url, namespace, **values))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody reaped yet runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _pid_in(path: Path) -> int:
    await wait_until(lambda: path.exists() and path.read_text() != "", within=20)
    return int(await anyio.Path(path).read_text())


async def _stopped_while_running(
    client: Client, pool: WorkerPool, tmp_path: Path, name: str, *args: Any
) -> tuple[str, int]:
    """Enqueue a job of ``name`` (its first argument the path its child writes its pid
    to), and stop the pool once the job runs in its child: the job's id, the child's pid."""
    mark = tmp_path / "pid"
    job = await client.enqueue(name, str(mark), *args)
    async with pool.running():
        pid = await _pid_in(mark)
    return job.id, pid


async def _ended(client: Client, job_id: str) -> tuple[str | None, str | None, str | None]:
    """The job's state, reason and error once it is dead or aborted."""
    ended = ("dead", "aborted")

    async def done() -> bool:
        record = await client.job(job_id)
        return record is not None and record.state in ended

    await wait_until(done, within=20)
    record = await client.job(job_id)
    assert record is not None
    return record.state, record.reason, record.error


async def test_args_kwargs_and_a_json_result(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace)
    pool.job(isolated=True)(jobs.add)
    by_position = await client.enqueue("add", 1, 2)
    by_name = await client.enqueue("add", a=3, scale=10)
    async with pool.running():
        first = await client.wait(by_position.id, timeout=20)
        second = await client.wait(by_name.id, timeout=20)
    assert first["sum"] == 3 and second["sum"] == 50
    assert first["pid"] != os.getpid() and second["pid"] != os.getpid()


async def test_ctx_progress_checkin_job_log_and_logs_from_the_child(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace)
    pool.job(isolated=True, idle_timeout=30)(jobs.reports)
    job = await client.enqueue("reports", steps=4)
    with structlog.testing.capture_logs() as logs:
        async with pool.running():
            assert await client.wait(job.id, timeout=20) == f"{job.id}:{{'steps': 4}}"
    forwarded = {e["event"]: e for e in logs if e.get("job_id") == job.id and "child_pid" in e}
    assert forwarded["stdlib line from the child"]["log_level"] == "warning"
    structlog_line = forwarded["structlog line from the child"]
    assert (structlog_line["job_name"], structlog_line["step_count"]) == ("reports", 4)
    record = await client.job(job.id)
    assert record is not None and record.progress == "100 step 4"
    assert await client.job_log(job.id) == ["ran 4 steps in reports attempt 1"]


async def test_a_cpu_loop_past_its_timeout_ends_timeout_and_the_next_job_runs(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1)
    pool.job(isolated=True, timeout=1, max_fails=1)(jobs.loop_forever)
    pool.job(isolated=True)(jobs.add)
    looping = await client.enqueue("loop_forever")
    async with pool.running():
        assert await _ended(client, looping.id) == ("dead", "timeout", "timed out after 1 s")
        after = await client.enqueue("add", 1)
        assert (await client.wait(after.id, timeout=20))["sum"] == 3


@pytest.mark.parametrize("how", ["exit", "sigkill"])
async def test_a_child_that_dies_ends_crashed_and_the_pool_goes_on(
    client: Client, redis_url: str, namespace: str, tmp_path: Path, how: str
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1)
    pool.job(isolated=True, max_fails=1)(jobs.exits)
    pool.job(isolated=True, max_fails=1)(jobs.waits_for_kill)
    pool.job(isolated=True)(jobs.add)
    mark = tmp_path / "pid"
    async with pool.running():
        if how == "exit":
            dying = await client.enqueue("exits", 1)
            want = "exited with code 1"
        else:
            dying = await client.enqueue("waits_for_kill", str(mark))
            os.kill(await _pid_in(mark), signal.SIGKILL)
            want = "killed by SIGKILL"
        state, reason, error = await _ended(client, dying.id)
        assert (state, reason) == ("dead", "crashed")
        assert error is not None and want in error
        after = await client.enqueue("add", 2)
        assert (await client.wait(after.id, timeout=20))["sum"] == 4


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"no": "kind"}', '{"t": NaN}'])
async def test_a_malformed_line_from_a_child_ends_crashed_and_the_pool_goes_on(
    client: Client, redis_url: str, namespace: str, line: str
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1)
    pool.job(isolated=True, max_fails=1)(jobs.garbles)
    pool.job(isolated=True)(jobs.add)
    async with pool.running():
        bad = await client.enqueue("garbles", line)
        state, reason, error = await _ended(client, bad.id)
        assert (state, reason) == ("dead", "crashed")
        assert error is not None and "sent a malformed line" in error
        after = await client.enqueue("add", 2)
        assert (await client.wait(after.id, timeout=20))["sum"] == 4


async def test_a_crash_is_retried_by_max_fails(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1)
    pool.job(isolated=True, max_fails=2, backoff=lambda n: 0)(jobs.exits)
    job = await client.enqueue("exits", 3)
    async with pool.running():
        assert (await _ended(client, job.id))[:2] == ("dead", "crashed")
    record = await client.job(job.id)
    assert record is not None and (record.attempts, record.failures) == (2, 2)


async def test_an_abort_kills_the_child(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1)
    pool.job(isolated=True)(jobs.waits_for_kill)
    pool.job(isolated=True)(jobs.add)
    mark = tmp_path / "pid"
    job = await client.enqueue("waits_for_kill", str(mark))
    async with pool.running():
        pid = await _pid_in(mark)
        await client.abort(job.id)
        assert (await _ended(client, job.id))[:2] == ("aborted", "aborted")
        await wait_until(lambda: not _alive(pid), within=10)
        after = await client.enqueue("add", 5)
        assert (await client.wait(after.id, timeout=20))["pid"] != pid


async def test_an_exception_in_the_child_is_a_failure_with_its_type_and_message(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace)
    pool.job(isolated=True, max_fails=1)(jobs.boom)
    pool.job(isolated=True, max_fails=1)(jobs.retries)
    failing = await client.enqueue("boom", "no good")
    retrying = await client.enqueue("retries")
    async with pool.running():
        with pytest.raises(JobFailed, match="ValueError: no good"):
            await client.wait(failing.id, timeout=20)
        assert await _ended(client, retrying.id) == ("dead", "retry", "once more")
    lines = await client.job_log(failing.id)
    assert "ValueError: no good" in lines[-1] and "isolated_jobs.py" in lines[-1]


async def test_past_the_memory_limit_the_attempt_ends_crashed(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = _pool(redis_url, namespace, child_processes=1, child_memory_mb=512)
    pool.job(isolated=True, max_fails=1)(jobs.allocate)
    big = await client.enqueue("allocate", 4096)
    small = await client.enqueue("allocate", 1)
    async with pool.running():
        state, reason, error = await _ended(client, big.id)
        assert (state, reason) == ("dead", "crashed")
        assert error is not None and "MemoryError" in error
        assert await client.wait(small.id, timeout=20) == 1024 * 1024


@pytest.mark.parametrize(
    ("name", "args", "result"),
    [
        ("sleeps", (0.5,), "slept"),  # a child finishes its job within grace
        ("until_stopping", (), "stopping seen: True"),  # its checkin learns the pool stops
    ],
)
async def test_shutdown_lets_children_finish_within_grace(
    client: Client,
    redis_url: str,
    namespace: str,
    tmp_path: Path,
    name: str,
    args: tuple[Any, ...],
    result: str,
) -> None:
    pool = _pool(redis_url, namespace, grace=10)
    pool.job(isolated=True)(getattr(jobs, name))
    job_id, pid = await _stopped_while_running(client, pool, tmp_path, name, *args)
    assert await client.wait(job_id, timeout=5) == result
    await wait_until(lambda: not _alive(pid), within=10)  # the pool killed its children


async def test_past_grace_the_child_is_killed_and_its_job_goes_back(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    pool = _pool(redis_url, namespace, grace=0.2)
    pool.job(isolated=True)(jobs.waits_for_kill)
    job_id, pid = await _stopped_while_running(client, pool, tmp_path, "waits_for_kill")
    await wait_until(lambda: not _alive(pid), within=10)
    record = await client.job(job_id)
    assert record is not None and record.state == "queued" and record.failures == 0


async def test_queued_isolated_jobs_leave_workers_to_the_other_jobs(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """The pool leases isolated jobs within its children's room (a child's worth and
    as many waiting): a backlog of them never takes every worker. Here one child, three
    workers, and long isolated jobs: two of them held, the third worker free."""
    pool = _pool(redis_url, namespace, child_processes=1, concurrency=3, grace=0.2)
    pool.job(isolated=True)(jobs.sleeps)

    @pool.job
    async def quick() -> str:
        return "quick"

    for i in range(5):
        await client.enqueue("sleeps", str(tmp_path / str(i)), 60)
    async with pool.running():
        await wait_until(lambda: any(tmp_path.iterdir()))  # one runs in the child
        after = await client.enqueue("quick")
        assert await client.wait(after.id, timeout=20) == "quick"


async def test_an_async_job_starts_while_a_batch_is_cut_to_the_childrens_room(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """One child runs an isolated job and no other is queued: the room is one more,
    and a fetch holding the isolated name is cut to one job. An async job's wake token
    must still lease it, whichever name the robin's turn puts first. (The cut once left
    the async name out of the batch and the fill: a fetch with the isolated name alone
    took its token and leased nothing, and the job waited for the next token, here for
    the wait's timeout, after the child's job.) Each async job starts before the
    isolated one ends, which waits for a file only the test writes."""
    pool = _pool(redis_url, namespace, child_processes=1, wake_timeout=60)
    pool.job(isolated=True)(jobs.holds)
    mark, release = tmp_path / "pid", tmp_path / "release"
    released_at_start: list[bool] = []

    @pool.job
    async def tick() -> None:
        released_at_start.append(release.exists())

    held = await client.enqueue("holds", str(mark), str(release))
    async with pool.running():
        await _pid_in(mark)
        try:
            for _ in range(6):  # both of the robin's orders, several times
                ticked = await client.enqueue("tick")
                await client.wait(ticked.id, timeout=20)
        finally:
            release.touch()
        assert await client.wait(held.id, timeout=20) == "released"
    assert released_at_start == [False] * 6


_POOL_SCRIPT = """
import sys
import anyio
from rota import Settings, WorkerPool
from tests import isolated_jobs

settings = Settings(
    redis_url=sys.argv[1], namespace=sys.argv[2], shards=int(sys.argv[3]), child_processes=1
)
pool = WorkerPool(settings=settings)
pool.job(isolated=True)(isolated_jobs.waits_for_kill)
anyio.run(pool.run)
"""


async def test_a_child_whose_pool_is_killed_exits(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """SIGKILL of the pool leaves no child computing for nobody: its pipe closes."""
    script = tmp_path / "pool.py"
    script.write_text(_POOL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    mark = tmp_path / "pid"
    await client.enqueue("waits_for_kill", str(mark))
    shards = str(len(client.admin.shards))
    async with await anyio.open_process(
        [sys.executable, str(script), redis_url, namespace, shards],
        env=env,
        stdout=None,
        stderr=None,
    ) as pool_process:
        try:
            child = await _pid_in(mark)
        finally:  # a pool that never ran the job must not outlive the test either
            pool_process.kill()
        await pool_process.wait()
    await wait_until(lambda: not _alive(child), within=10)


def test_the_pool_size_defaults_to_the_cpu_count() -> None:
    assert Children(0, 0).size == (os.cpu_count() or 1)
    assert Children(3, 0).size == 3


async def test_a_child_is_in_the_pools_session_and_a_process_group_of_its_own(
    client: Client, redis_url: str, namespace: str
) -> None:
    """Its own process group: a terminal's Ctrl-C (to the foreground group) reaches the
    pool, which drains its children. The pool's session: where the kernel shares CPU by
    session (autogroup), CPU-bound children do not each weigh as much as the pool."""
    pool = _pool(redis_url, namespace)
    pool.job(isolated=True)(jobs.where)
    job = await client.enqueue("where")
    async with pool.running():
        sid, pgid, pid = await client.wait(job.id, timeout=20)
    assert pid != os.getpid()
    assert sid == os.getsid(0)
    assert pgid == pid != os.getpgid(0)
