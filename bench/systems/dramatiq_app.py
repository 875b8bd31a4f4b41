"""dramatiq with its Redis broker and the AsyncIO middleware (async actors):
``dramatiq bench.systems.dramatiq_app --processes 1 --threads N``.

dramatiq's ``send`` is synchronous: the producer calls it directly one at a time, and
from 64 threads for 64 in flight. ``group`` sends its messages one by one, so there is
no batch enqueue. The AsyncIO middleware's loop is uvloop (policy installed here).
"""

from __future__ import annotations

import dramatiq
import uvloop
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import AsyncIO

from bench.systems.common import noop_body, redis_url, sleep_body

uvloop.install()

broker = RedisBroker(url=redis_url(), namespace="bench")
broker.add_middleware(AsyncIO())
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="noop")
async def noop(t: float) -> None:
    noop_body("noop", t)


@dramatiq.actor(actor_name="sleep")
async def sleep(t: float) -> None:
    await sleep_body("sleep", t)


ACTORS = {"noop": noop, "sleep": sleep}


class Producer:
    batch_api = None  # group() sends one by one
    sync = True  # send() blocks: the producer calls it from threads

    def __init__(self, url: str) -> None:
        assert url == redis_url(), "the broker reads BENCH_REDIS_URL"

    async def open(self) -> None:
        pass

    def one_sync(self, job: str, t: float) -> None:
        ACTORS[job].send(t)

    async def close(self) -> None:
        broker.close()
