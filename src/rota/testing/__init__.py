"""Helpers for testing your handlers against a real, throwaway Redis.

>>> async def test_greet():
...     async with rota.testing.pool_client(pool) as client:
...         job = await client.enqueue("greet", name="Ada")
...         assert await client.wait(job.id, timeout=5) == "hello Ada"

or, for one job: ``assert await rota.testing.run_job(pool, "greet", name="Ada") == ...``.
The Redis is a private ``redis-server`` on a Unix socket in a temporary directory (see
:mod:`rota.testing.embedded`), removed afterwards; pass ``redis_url`` to use your own instead,
and the keys of the namespace are deleted afterwards. Each call uses a fresh namespace,
so tests never see each other's jobs. ``fast_retries=True`` retries failed jobs at once
instead of after the handlers' backoff, so a test of a retried job takes milliseconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

from rota.client import Client, admin_reads
from rota.testing.embedded import embedded_redis
from rota.worker.pool import WorkerPool
from rota.worker.runtime import PoolRuntime

#: ``PoolRuntime`` is what ``WorkerPool.running`` yields: the state the pool's tasks
#: share (its client, settings, handoff), for tests that look inside a running pool.
__all__ = ["PoolRuntime", "pool_client", "run_job"]


def _no_wait(failures: int) -> float:
    return 0.0


@contextlib.asynccontextmanager
async def pool_client(
    pool: WorkerPool,
    redis_url: str | None = None,
    *,
    fast_retries: bool = False,
    **settings: Any,
) -> AsyncIterator[Client]:
    """Run ``pool`` on a throwaway Redis (or ``redis_url``) in a fresh namespace, and
    yield a client of that namespace. ``settings`` override the pool's (e.g. grace=1);
    ``fast_retries`` runs retries without the backoff wait."""
    with contextlib.ExitStack() as stack:
        url = redis_url or stack.enter_context(embedded_redis())
        namespace = "test-" + uuid.uuid4().hex[:12]
        previous, handlers = pool.settings, pool.handlers
        pool.configure(previous.replace(redis_url=url, namespace=namespace, **settings))
        if fast_retries:
            pool.handlers = {
                name: dataclasses.replace(h, backoff=_no_wait) for name, h in handlers.items()
            }
        try:
            # The pool's own settings (limits, credentials), as every client of rota's.
            async with Client.from_settings(pool.settings) as client:
                try:
                    async with pool.running():
                        yield client
                finally:
                    if redis_url is not None:
                        await admin_reads.forget_namespace(client)
        finally:
            pool.configure(previous)
            pool.handlers = handlers


async def run_job(
    pool: WorkerPool,
    name: str,
    /,
    *args: Any,
    timeout: float = 30.0,  # noqa: ASYNC109 - the job's wait, passed to client.wait
    redis_url: str | None = None,
    fast_retries: bool = True,
    **kwargs: Any,
) -> Any:
    """Enqueue one job, run it through the pool (middleware, checks, retries and all) and
    return its result; raises :class:`rota.JobFailed` if it ends dead or aborted.
    Retries run without the backoff wait unless ``fast_retries=False``."""
    async with pool_client(
        pool,
        redis_url,
        fast_retries=fast_retries,
        keep_result=max(60.0, timeout),
        keep_none=max(60.0, timeout),  # a job that returns None may end before the wait
    ) as client:
        job = await client.enqueue(name, *args, **kwargs)
        return await client.wait(job.id, timeout=timeout)
