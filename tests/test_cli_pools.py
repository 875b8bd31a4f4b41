"""``rota pools list|quiet|stop|resume`` against a ``rota worker`` process: the pool
obeys at its heartbeat, and a stopped worker drains and exits as on SIGTERM."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from rota import Client
from tests.cli_helpers import log_events, rota_env, rota_json, run_rota, start_worker
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line


async def test_quiet_resume_and_stop_a_worker_process(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    env = rota_env(
        ROTA_REDIS_URL=redis_url, ROTA_NAMESPACE=namespace, ROTA_HEARTBEAT_INTERVAL="0.2"
    )
    proc = start_worker("tests.cli_app:pool", env=env)
    try:

        async def rota(*args: str) -> subprocess.CompletedProcess[str]:
            return await anyio.to_thread.run_sync(lambda: run_rota(*args, *conn))

        await wait_until(lambda: _live(client), within=30)
        (listed,) = await anyio.to_thread.run_sync(lambda: rota_json("pools", "list", *conn))
        pool_id, host = listed["id"], listed["host"]
        assert (listed["state"], listed["told"]) == ("running", None)

        quiet = await anyio.to_thread.run_sync(
            lambda: rota_json("pools", "quiet", pool_id, "--wait", *conn)
        )
        assert quiet == {"command": "quiet", "pools": [pool_id], "states": {pool_id: "quiet"}}
        listing = (await rota("pools", "list")).stdout
        assert f"{pool_id}\t{host}\t" in listing and "\tquiet\tquiet\t" in listing

        resumed = await rota("pools", "resume", "--host", host, "--wait")
        assert (resumed.returncode, resumed.stdout) == (0, f"resume: {pool_id} (running)\n")

        usage = "rota: error: give a pool ID or --host, not both (rota pools quiet --help)"
        assert _one_line(await rota("pools", "quiet"), 2) == usage
        assert _one_line(await rota("pools", "quiet", pool_id, "--host", host), 2) == usage
        assert _one_line(await rota("pools", "stop", "nosuch"), 1) == "rota: no live pool nosuch"
        assert _one_line(await rota("pools", "stop", "--host", "nohost"), 1) == (
            "rota: no live pool on host nohost"
        )

        stop = await anyio.to_thread.run_sync(
            lambda: rota_json("pools", "stop", "--host", host, "--wait", *conn)
        )
        assert stop["command"] == "stop" and stop["pools"] == [pool_id]
        assert stop["states"][pool_id] in ("stopping", None)
        # the worker drains and exits as on SIGTERM
        assert await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30)) == 0
        await wait_until(lambda: _gone(client), within=10)
    finally:
        proc.kill()
        proc.wait()


async def _live(client: Client) -> bool:
    return len(await client.admin.pools()) == 1


async def _gone(client: Client) -> bool:
    return await client.admin.pools() == [] and await client.admin.commands.read() == {}


async def test_a_stopped_child_of_a_supervisor_is_not_restarted(
    client: Client, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "supervisor.log"
    env = rota_env(
        ROTA_REDIS_URL=redis_url,
        ROTA_NAMESPACE=namespace,
        ROTA_HEARTBEAT_INTERVAL="0.2",
        ROTA_LOG_FORMAT="json",
    )
    proc = start_worker("tests.cli_app:pool", "--processes", "2", env=env, log=log)
    try:
        await wait_until(lambda: _count(client, 2), within=30)
        first, second = [p.id for p in await client.admin.pools()]
        await client.admin.commands.stop_pool(first)
        # the supervisor says it leaves that slot alone, and the other pool runs on
        await wait_until(lambda: _stopped_lines(log) == 1, within=30)
        assert [p.id for p in await client.admin.pools()] == [second]
        assert proc.poll() is None
        await client.admin.commands.stop_pool(second)  # the last one: the supervisor is done
        await wait_until(lambda: proc.poll() is not None, within=30, every=0.05)
        assert proc.returncode == 0
        assert _stopped_lines(log) == 2
        assert b"worker process died: restarting" not in log.read_bytes()
    finally:
        proc.kill()
        proc.wait()


async def _count(client: Client, n: int) -> bool:
    return len(await client.admin.pools()) == n


def _stopped_lines(log: Path) -> int:
    return sum(
        e.get("event") == "worker process stopped by an operator: not restarted"
        for e in log_events(log)
    )
