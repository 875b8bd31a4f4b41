"""``rota worker`` as a process: signals, draining, and the --processes supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import msgspec

from rota import Client, State
from rota.worker.threads import HOLDING, LEFT
from tests.cli_helpers import REPO, rota_env, start_worker
from tests.helpers import wait_until
from tests.redis_server import RedisServer

FAST = {"ROTA_HEARTBEAT_INTERVAL": "0.3", "ROTA_LEASE": "1.5", "ROTA_KEEP_RESULT": "600"}


def _env(redis_url: str, namespace: str, **extra: str) -> dict[str, str]:
    return rota_env(ROTA_REDIS_URL=redis_url, ROTA_NAMESPACE=namespace, **FAST, **extra)


async def _state(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def _exit_code(proc: subprocess.Popen[bytes], within: float) -> int:
    await wait_until(lambda: proc.poll() is not None, within=within, every=0.05)
    return proc.returncode


def _log_events(log: Path) -> list[str]:
    events = []
    for line in log.read_bytes().splitlines():
        try:
            events.append(msgspec.json.decode(line)["event"])
        except (msgspec.DecodeError, KeyError, TypeError):
            continue
    return events


async def test_sigterm_drains_and_exits_0(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    proc = start_worker("tests.cli_app:pool", env=_env(redis_url, namespace), log=log)
    try:
        job = await client.enqueue("nap", seconds=1.0)
        await wait_until(lambda: _state(client, job.id, State.RUNNING), within=20)
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc, within=20) == 0
    finally:
        proc.kill()
    assert await _state(client, job.id, State.COMPLETE)
    events = _log_events(log)
    for event in (
        "pool started",
        "signal received: draining",
        "pool draining",
        "job",
        "pool stopped",
    ):
        assert event in events, events
    assert await client.admin.pools() == []


async def test_second_signal_skips_the_wait(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    proc = start_worker(
        "tests.cli_app:pool", env=_env(redis_url, namespace), log=tmp_path / "worker.log"
    )
    try:
        job = await client.enqueue("nap", seconds=60)
        await wait_until(lambda: _state(client, job.id, State.RUNNING), within=20)
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: "pool draining" in _log_events(tmp_path / "worker.log"))
        assert proc.poll() is None  # still waiting for the job (grace is 30 s)
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc, within=10) == 0
    finally:
        proc.kill()
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.failures) == (State.QUEUED, 0)


async def test_a_second_signal_exits_without_waiting_for_a_handler_thread(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """A handler thread past grace holds the process, and the log says so; a second
    signal exits at once (the interpreter would wait for the thread), the job not put
    back while its thread may still run: its lease expires instead."""
    log, release = tmp_path / "worker.log", tmp_path / "release"
    proc = start_worker(
        "tests.cli_app:pool", env=_env(redis_url, namespace, ROTA_GRACE="0.5"), log=log
    )
    try:
        job = await client.enqueue("hold", path=str(release))
        await wait_until(lambda: _state(client, job.id, State.RUNNING), within=20)
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: HOLDING in _log_events(log), within=20)
        assert proc.poll() is None  # the thread holds it, and nothing ends the thread
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc, within=10) == 0
    finally:
        proc.kill()
        release.touch()
    events = _log_events(log)
    assert LEFT in events, events
    assert "exiting without waiting for handler threads that still run" in events
    assert await _state(client, job.id, State.RUNNING)


async def test_supervisor_replaces_a_killed_child_and_recovers_its_jobs(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "supervisor.log"
    # No prefetch: both children must be busy at once, and a pool that prefetches may
    # take all eight jobs in its first fetch when they are enqueued fast enough.
    env = _env(redis_url, namespace, ROTA_PREFETCH="0")
    proc = start_worker("tests.cli_app:pool", "--processes", "2", env=env, log=log)
    try:
        await wait_until(lambda: _pool_count(client, 2), within=30)
        jobs = [await client.enqueue("nap", seconds=1.0) for _ in range(8)]
        await wait_until(lambda: _busy_pids(client, 2), within=20)
        pids = {snap.pid for snap in await client.admin.pools() if snap.busy}
        victim = sorted(pids)[0]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        await wait_until(lambda: _replaced(client, victim), within=10)
        # replaced after the supervisor's short delay; generous for a loaded machine
        assert time.monotonic() - killed_at < 8
        for job in jobs:
            await wait_until(partial(_state, client, job.id, State.COMPLETE), within=30)
        assert (await client.admin.stats()).get("lost", 0) >= 1
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc, within=30) == 0
    finally:
        proc.kill()
    assert "worker process died: restarting" in _log_events(log)
    await wait_until(lambda: _pool_count(client, 0), within=5)


async def _pool_count(client: Client, n: int) -> bool:
    return len(await client.admin.pools()) == n


async def _busy_pids(client: Client, n: int) -> bool:
    return len({snap.pid for snap in await client.admin.pools() if snap.busy}) >= n


async def _replaced(client: Client, victim: int) -> bool:
    pids = {snap.pid for snap in await client.admin.pools()}
    return victim not in pids and len(pids) == 2


def test_supervisor_stops_when_a_child_refuses_its_settings(tmp_path: Path) -> None:
    """A wrong password fails every child the same way: exit 2 once, no restart loop."""
    with RedisServer() as server:
        server.client().config_set("requirepass", "right")
        url = f"redis://:wrong@127.0.0.1:{server.port}/0"
        log = tmp_path / "supervisor.log"
        with log.open("wb") as out:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "rota",
                    "worker",
                    "tests.chaos.app:pool",
                    "--processes",
                    "2",
                ],
                cwd=REPO,
                env=_env(url, "sup"),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
                check=False,
            )
    text = log.read_text()
    assert proc.returncode == 2, text
    assert "worker process refused its settings: stopping" in _log_events(log)
    assert "worker process died: restarting" not in _log_events(log)
    assert "Traceback" not in text and ":wrong@" not in text
    assert "invalid username-password pair" in text
