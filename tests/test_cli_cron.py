"""``rota cron run NAME``: one run of a periodic job now, from a terminal, with the args
its live pools give it; a name no live pool fires exits 1 with one line. The command
in a subprocess, a real pool, real Redis."""

from __future__ import annotations

import anyio
import pytest

from rota import Client, JobContext, WorkerPool
from tests.cli_helpers import run_rota
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(60)


async def test_rota_cron_run_enqueues_one_run_now(
    client: Client, redis_url: str, namespace: str
) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    done = await anyio.to_thread.run_sync(lambda: run_rota("cron", "run", "digest", *conn))
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == "rota: no live pool fires a periodic job 'digest'"
    ran: list[tuple[str, int]] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=2.0))

    @pool.periodic("0 0 1 1 *", name="digest", args=(7,))
    async def digest(ctx: JobContext, n: int) -> None:
        ran.append((ctx.id, n))

    async with pool.running():

        async def fired() -> bool:
            return any(c.name == "digest" for p in await client.admin.pools() for c in p.periodic)

        await wait_until(fired, within=10)
        done = await anyio.to_thread.run_sync(lambda: run_rota("cron", "run", "digest", *conn))
        assert done.returncode == 0, done.stderr
        job_id = done.stdout.strip().removesuffix(": enqueued")
        assert job_id.startswith("cron:digest:") and done.stdout.strip().endswith("enqueued")
        await wait_until(lambda: ran == [(job_id, 7)], within=10)
    done = await anyio.to_thread.run_sync(lambda: run_rota("cron", "run", "bad name", *conn))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("rota: invalid job name 'bad name': use 1-128")
