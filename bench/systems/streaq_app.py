"""streaq: ``streaq run bench.systems.streaq_app:worker`` (``concurrency`` on the Worker).

The producer enters the worker's context and awaits ``task.enqueue(...)``, or sends a
batch with ``worker.enqueue_many`` (one pipeline). uvloop through ``anyio_kwargs``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from streaq import Worker

from bench.systems.common import concurrency, noop_body, redis_url, sleep_body

worker: Worker[Any] = Worker(
    redis_url=redis_url(),
    concurrency=concurrency(),
    queue_name="bench",
    anyio_kwargs={"use_uvloop": True},
)


@worker.task
async def noop(t: float) -> None:
    noop_body("noop", t)


@worker.task
async def sleep(t: float) -> None:
    await sleep_body("sleep", t)


TASKS = {"noop": noop, "sleep": sleep}


class Producer:
    batch_api = "enqueue_many"

    def __init__(self, url: str) -> None:
        assert url == redis_url(), "the worker object reads BENCH_REDIS_URL"
        self.stack = AsyncExitStack()

    async def open(self) -> None:
        await self.stack.enter_async_context(worker)

    async def one(self, job: str, t: float) -> None:
        await TASKS[job].enqueue(t)

    async def many(self, job: str, ts: list[float]) -> None:
        task = TASKS[job]
        await worker.enqueue_many([task.enqueue(t) for t in ts])

    async def close(self) -> None:
        await self.stack.aclose()
