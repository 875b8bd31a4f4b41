"""The pool's one fetcher: a batch of jobs per script call, wake lists instead of polling.

When k jobs fit in the pool (free workers, plus room to prefetch while jobs are short;
see :mod:`rota.worker.handoff`) it leases up to k jobs in one call, visiting job names in the
weighted round robin's order. When that finds less than it wanted, it blocks on the wake
lists of its job names, which every script that makes a job runnable pushes to; the
BLPOP timeout is only a safety net for producers that forget to push a wake token.
"""

from __future__ import annotations

import anyio
import redis.exceptions
import structlog
from redis.asyncio import Redis

from rota.client import now_ms
from rota.link import Link
from rota.protocol.scripts import Arg, script
from rota.worker.robin import Robin
from rota.worker.runtime import Fetched, PoolRuntime, RedisHealth

__all__ = ["Fetcher"]

log = structlog.get_logger("rota.pool")

_REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class Fetcher:
    def __init__(self, rt: PoolRuntime, robin: Robin) -> None:
        self.rt = rt
        self.robin = robin
        self.wake_keys = [rt.keys.wake(name) for name in rt.handlers]
        self.names = list(rt.handlers)
        self._turn = 0
        self.health = RedisHealth("fetcher")
        self.buried = 0
        # A connection of its own: its BLPOP blocks it, and the fetch that follows a
        # wake-up needs no pool checkout (see rota.link).
        try:
            self.conn: Link | Redis = Link.from_redis(rt.redis)
        except (ValueError, TypeError, AttributeError):  # not a plain TCP/TLS/unix client
            self.conn = rt.redis

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if isinstance(self.conn, Link):
                with anyio.CancelScope(shield=True):
                    await self.conn.aclose()

    async def _run(self) -> None:
        rt = self.rt
        handoff = rt.handoff
        # Stop on the flag, not only on cancellation: while the pool drains, workers hand
        # each fetched job back at once, so slots are free again by the time a fetch
        # returns, the next fetch starts without a checkpoint outside the shield, and the
        # cancellation would never land.
        while not rt.stopping.is_set():
            want = min(await handoff.wait_room(), rt.settings.fetch_batch)
            try:
                with anyio.CancelScope(shield=True):
                    # Shielded: a lease whose reply never arrives would wait for the reaper.
                    jobs = await self._fetch(want)
                for job in jobs:
                    handoff.put(job)
                if len(jobs) < want:
                    await self.conn.execute_command(
                        "BLPOP", *self.wake_keys, rt.settings.wake_timeout
                    )
                self.health.ok()
            except _REDIS_ERRORS as exc:
                await anyio.sleep(self.health.failed(exc))

    async def _fetch(self, want: int) -> list[Fetched]:
        rt = self.rt
        now = now_ms()
        names = self.robin.take(want)
        # The pool's other names fill the batch when the robin's are empty; a rotating
        # start keeps that fill fair between them.
        k = self._turn % len(self.names)
        self._turn += 1
        fill = [n for n in self.names[k:] + self.names[:k] if n not in names]
        args: list[Arg] = [
            now,
            int(rt.settings.lease * 1000),
            rt.pool_id,
            rt.settings.max_args_bytes,
            len(names),
            *names,
            len(fill),
            *fill,
        ]
        flat, buried = await script("fetch")(self.conn, rt.keys.prefix, args)
        for job_id in buried:
            self.buried += 1
            log.warning("bad payload made dead", job_id=job_id.decode("utf-8", "replace"))
        return Fetched.parse(flat)
