"""Which attempts a running pool counts in its names' run-time histograms: complete
ones, failed ones (each retry, a death, a timeout at the time it was cut) and isolated
handlers' alike, each from its lease's start to its finish. The handlers sleep, so each
run time has a lower bound (and no upper one: timings are not asserted)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from rota import Client, JobContext, JobFailed, WorkerPool
from tests import isolated_jobs as jobs
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(60)


async def test_a_pool_counts_every_attempt_that_ran_to_an_outcome(
    client: Client, redis_url: str, namespace: str
) -> None:
    values: dict[str, Any] = {"child_processes": 1, "keep_result": 60}
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **values))

    @pool.job()
    async def naps(ctx: JobContext, seconds: float) -> None:
        await anyio.sleep(seconds)

    @pool.job(timeout=0.1, max_fails=1)
    async def stuck(ctx: JobContext) -> None:
        await anyio.sleep(30)

    @pool.job(max_fails=2, backoff=lambda n: 0)
    async def flaky(ctx: JobContext) -> None:
        raise RuntimeError("down")

    pool.job(isolated=True)(jobs.add)

    napping = [await client.enqueue("naps", 0.06) for _ in range(3)]
    adding = [await client.enqueue("add", 1), await client.enqueue("add", 2)]
    ended = [await client.enqueue("stuck"), await client.enqueue("flaky")]
    async with pool.running():
        for job in napping + adding:
            await client.wait(job.id, timeout=20)
        for job in ended:
            with pytest.raises(JobFailed, match="ended dead"):
                await client.wait(job.id, timeout=20)

    async def counted() -> bool:
        flaky = await client.admin.run_times.of("flaky")
        return flaky.count == 2

    await wait_until(counted, within=10)
    naps_, stuck_, add_ = [await client.admin.run_times.of(n) for n in ("naps", "stuck", "add")]
    assert (naps_.count, stuck_.count, add_.count) == (3, 1, 2)
    assert naps_.p50_ms is not None and naps_.p50_ms >= 87  # 60 ms sleeps: bucket (58, 87]
    assert stuck_.max_ms is None or stuck_.max_ms >= 130  # cut at 100 ms: bucket (87, 130]
