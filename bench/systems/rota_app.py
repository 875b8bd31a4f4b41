"""rota: ``python -m rota worker bench.systems.rota_app:pool -c N --redis-url URL``.

``prio_pool`` serves four job names with priorities 8, 4, 2 and 1 (the priorities
workload). The producer uses :class:`rota.Client`: ``enqueue`` one at a time and
``enqueue_many`` for batches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import rota
from bench.systems.common import noop_body, sleep_body

NAMESPACE = "bench"
PRIORITIES = {"p8": 8, "p4": 4, "p2": 2, "p1": 1}

pool = rota.WorkerPool(namespace=NAMESPACE)


@pool.job
async def noop(t: float) -> None:
    noop_body("noop", t)


@pool.job
async def sleep(t: float) -> None:
    await sleep_body("sleep", t)


prio_pool = rota.WorkerPool(namespace=NAMESPACE)


def _prio_handler(name: str) -> Callable[[float], Awaitable[None]]:
    async def handler(t: float) -> None:
        noop_body(name, t)

    return handler


for _name, _priority in PRIORITIES.items():
    prio_pool.job(name=_name, priority=_priority)(_prio_handler(_name))


class Producer:
    """Enqueues through the public client API."""

    batch_api = "enqueue_many"

    def __init__(self, url: str) -> None:
        self.client = rota.Client.from_url(url, namespace=NAMESPACE)

    async def open(self) -> None:
        pass

    async def one(self, job: str, t: float) -> None:
        await self.client.enqueue(job, t)

    async def many(self, job: str, ts: list[float]) -> None:
        await self.client.enqueue_many([rota.JobSpec(name=job, args=(t,)) for t in ts])

    async def close(self) -> None:
        await self.client.close()
