"""A blocked event loop is reported while it lasts, naming the job that blocks it."""

from __future__ import annotations

import time
from collections.abc import MutableMapping, Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from rota import Client, JobContext, WorkerPool
from rota.worker.loopwatch import BLOCKED
from tests.helpers import pool_settings, wait_until


def _events(logs: Sequence[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == event]


@pytest.mark.parametrize("warn", [0.1, 0])
async def test_an_async_handler_that_blocks_the_loop_is_named(
    client: Client, redis_url: str, namespace: str, warn: float
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, loop_block_warn=warn))

    @pool.job
    async def block(ctx: JobContext, seconds: float) -> None:
        time.sleep(seconds)  # noqa: ASYNC251 - the blocking call under test

    job = await client.enqueue("block", seconds=1.0)
    with capture_logs() as logs:
        async with pool.running():
            await wait_until(lambda: bool(_events(logs, "job")))
            if warn:
                await wait_until(lambda: bool(_events(logs, "event loop turns again")))
    if not warn:  # 0 turns the report off
        assert not [e for e in logs if e["event"].startswith("event loop")]
        return
    # (a loaded host may stall the loop past 0.1 s elsewhere too, which is reported as
    # well: the handler's block is the one that names its job and lasts its second)
    named = [e for e in _events(logs, BLOCKED) if e.get("job_id") == job.id]
    blocked = max(named, key=lambda e: float(e["blocked_s"]))
    assert blocked["job_name"] == "block"
    assert blocked["blocked_s"] >= warn
    assert blocked["limit"] == warn
    turns = [e for e in _events(logs, "event loop turns again") if e.get("job_id") == job.id]
    again = max(turns, key=lambda e: float(e["blocked_s"]))
    assert again["job_name"] == "block"
    assert again["blocked_s"] >= blocked["blocked_s"]
