"""Helpers for testing your handlers against a real, throwaway Redis.

>>> async def test_greet():
...     async with rota.testing.pool_client(pool) as client:
...         job = await client.enqueue("greet", name="Ada")
...         assert await client.wait(job.id, timeout=5) == "hello Ada"

or, for one job: ``assert await rota.testing.run_job(pool, "greet", name="Ada") == ...``.
The Redis is a private ``redis-server`` on a Unix socket in a temporary directory (see
:mod:`rota.embedded`), removed afterwards; pass ``redis_url`` to use your own instead.
Each call uses a fresh namespace, so tests never see each other's jobs.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from rota.client import Client
from rota.embedded import embedded_redis
from rota.worker.pool import WorkerPool

__all__ = ["pool_client", "run_job"]


@contextlib.asynccontextmanager
async def pool_client(
    pool: WorkerPool, redis_url: str | None = None, **settings: Any
) -> AsyncIterator[Client]:
    """Run ``pool`` on a throwaway Redis (or ``redis_url``) in a fresh namespace, and
    yield a client of that namespace. ``settings`` override the pool's (e.g. grace=1)."""
    with contextlib.ExitStack() as stack:
        url = redis_url or stack.enter_context(embedded_redis())
        namespace = "test-" + uuid.uuid4().hex[:12]
        previous = pool.settings
        pool.configure(previous.replace(redis_url=url, namespace=namespace, **settings))
        try:
            async with Client.from_url(url, namespace) as client, pool.running():
                yield client
        finally:
            pool.configure(previous)


async def run_job(
    pool: WorkerPool,
    name: str,
    /,
    *args: Any,
    timeout: float = 30.0,  # noqa: ASYNC109 - the job's wait, passed to client.wait
    **kwargs: Any,
) -> Any:
    """Enqueue one job, run it through the pool (middleware, checks, retries and all) and
    return its result; raises :class:`rota.JobFailed` if it ends dead or aborted."""
    async with pool_client(pool, keep_result=max(60.0, timeout)) as client:
        job = await client.enqueue(name, *args, **kwargs)
        return await client.wait(job.id, timeout=timeout)
