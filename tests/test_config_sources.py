"""Each value is told with its real source: in the pool's ``settings`` line, in a client
built from a URL, and for a Sentinel URL configured as README.md says."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from rota import Client, ConfigError, JobContext, Settings, WorkerPool
from rota.config import describe
from tests.cli_helpers import log_events, rota_env, start_worker
from tests.helpers import wait_until


def _settings_lines(log: Path) -> list[dict[str, Any]]:
    return [e for e in log_events(log) if e.get("event") == "settings"]


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_the_pools_settings_line_names_each_source(
    redis_url: str, namespace: str, tmp_path: Path, processes: str
) -> None:
    """A worker started with no flags but the file: the file's value is the file's, the
    variable's the variable's, the code's (tests/cli_app.py) the code's; and so in each
    process a supervisor starts (which reads them all from the variables it is given)."""
    config = tmp_path / "rota.toml"
    config.write_text("grace = 7\n")
    env = rota_env(ROTA_REDIS_URL=redis_url, ROTA_NAMESPACE=namespace, ROTA_LEASE="40")
    log = tmp_path / "worker.log"
    args = ("tests.cli_app:pool", "--config", str(config), "--processes", processes)
    proc = start_worker(*args, env=env, log=log)
    try:
        await wait_until(lambda: len(_settings_lines(log)) == int(processes), within=60)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    for told in _settings_lines(log):
        assert told["lease"] == "40.0 (ROTA_LEASE)", told
        assert told["namespace"] == f"{namespace} (ROTA_NAMESPACE)", told
        assert told["grace"] == f"7.0 ({config})", told
        assert told["concurrency"] == "5 (code)", told


async def test_client_from_url_reads_the_rota_variables_it_is_not_given(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: a producer rides through for ``ride_through`` seconds
    (ROTA_RIDE_THROUGH); the variables apply to a client from a URL as to a pool, and an
    argument given wins."""
    monkeypatch.setenv("ROTA_RIDE_THROUGH", "0")
    monkeypatch.setenv("ROTA_UNIQUE_TTL", "60")
    monkeypatch.setenv("ROTA_NAMESPACE", namespace)
    async with Client.from_url(redis_url) as client:
        assert (client.options.ride_through, client.options.unique_ttl) == (0.0, 60.0)
        assert client.namespace == namespace
        job = await client.enqueue("nap")
    async with Client.from_url(redis_url, namespace, ride_through=5.0) as client:
        assert client.options.ride_through == 5.0
        assert await client.job(job.id) is not None  # it went to ROTA_NAMESPACE
    monkeypatch.setenv("ROTA_RIDE_THROUGH", "soon")
    with pytest.raises(ConfigError, match="environment variable ROTA_RIDE_THROUGH"):
        Client.from_url(redis_url)


async def test_a_url_given_to_the_pool_in_code_is_told_as_the_codes(
    redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=Settings(lease=40.0), namespace=namespace)

    @pool.job
    async def nap(ctx: JobContext) -> None:
        return None

    async with pool.running(redis_url) as rt:
        told = describe(rt.settings)
    assert told["redis_url"] == f"{redis_url} (code)"
    assert told["namespace"] == f"{namespace} (code)"
    assert told["lease"] == "40.0 (code)"
