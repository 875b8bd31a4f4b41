"""Moves due scheduled and retry jobs into their queues, and trims the dead set.

It sleeps until the next due time (at most ``scheduler_interval``) by blocking on the
scheduler wake list, which enqueue_in/at and every retry push to, so a job scheduled a
second ahead starts within milliseconds of its time. Any pool moves any due job, whether
or not it handles that job name; the script is idempotent, so many pools may run it.
"""

from __future__ import annotations

import anyio
import redis.exceptions

from rota.client import now_ms
from rota.protocol.scripts import script
from rota.worker.runtime import PoolRuntime, RedisHealth

__all__ = ["Scheduler"]

_LIMIT = 1000
_TRIM_EVERY_MS = 60_000
_REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class Scheduler:
    def __init__(self, rt: PoolRuntime) -> None:
        self.rt = rt
        self.health = RedisHealth("scheduler")
        self._next_trim = 0

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
                self.health.ok()
            except _REDIS_ERRORS as exc:
                await anyio.sleep(self.health.failed(exc))

    async def tick(self) -> None:
        rt = self.rt
        now = now_ms()
        moved, next_due = await script("promote")(rt.redis, rt.keys.prefix, [now, _LIMIT])
        if now >= self._next_trim:
            self._next_trim = now + _TRIM_EVERY_MS
            s = rt.settings
            await script("trim_dead")(
                rt.redis,
                rt.keys.prefix,
                [now, int(s.dead_max_age * 1000), s.dead_max_count, _LIMIT],
            )
        if int(moved) >= _LIMIT:
            return  # more are due: go again at once
        cap = rt.settings.scheduler_interval
        due = int(next_due)
        wait = cap if due < 0 else min(cap, max(0.001, (due - now_ms()) / 1000))
        await rt.redis.blpop([rt.keys.sched_wake], timeout=wait)
