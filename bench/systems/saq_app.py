"""saq: ``saq bench.systems.saq_app.settings`` (``concurrency`` in the settings).

The producer uses ``Queue.from_url`` and ``queue.enqueue``. saq's ``map`` enqueues many
jobs but also waits for their results; it is no batch enqueue.
"""

from __future__ import annotations

from typing import Any

import uvloop
from saq import Queue

from bench.systems.common import concurrency, noop_body, redis_url, sleep_body

uvloop.install()


async def noop(ctx: dict[str, Any], *, t: float) -> None:
    noop_body("noop", t)


async def sleep(ctx: dict[str, Any], *, t: float) -> None:
    await sleep_body("sleep", t)


settings = {
    "queue": Queue.from_url(redis_url(), name="bench"),
    "functions": [noop, sleep],
    "concurrency": concurrency(),
}


class Producer:
    batch_api = None  # map() waits for results; no batch enqueue

    def __init__(self, url: str) -> None:
        self.queue = Queue.from_url(url, name="bench")

    async def open(self) -> None:
        await self.queue.connect()

    async def one(self, job: str, t: float) -> None:
        await self.queue.enqueue(job, t=t)

    async def close(self) -> None:
        await self.queue.disconnect()
