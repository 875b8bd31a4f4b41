"""taskiq with taskiq-redis's ``RedisStreamBroker`` (acknowledged delivery, like rota's):
``taskiq worker bench.systems.taskiq_app:broker --workers 1 --max-async-tasks N``.

The producer calls ``broker.startup()`` (which also creates the consumer group, so jobs
sent before the worker starts are seen) and ``task.kiq(...)``; taskiq has no batch kick.
taskiq's worker picks uvloop by itself when it is installed.
"""

from __future__ import annotations

from typing import Any

from taskiq_redis import RedisStreamBroker

from bench.systems.common import noop_body, redis_url, sleep_body

broker = RedisStreamBroker(url=redis_url(), queue_name="bench")


@broker.task(task_name="noop")
async def noop(t: float) -> None:
    noop_body("noop", t)


@broker.task(task_name="sleep")
async def sleep(t: float) -> None:
    await sleep_body("sleep", t)


TASKS: dict[str, Any] = {"noop": noop, "sleep": sleep}


class Producer:
    batch_api = None  # no batch kick

    def __init__(self, url: str) -> None:
        assert url == redis_url(), "the broker reads BENCH_REDIS_URL"

    async def open(self) -> None:
        await broker.startup()

    async def one(self, job: str, t: float) -> None:
        await TASKS[job].kiq(t)

    async def close(self) -> None:
        await broker.shutdown()
