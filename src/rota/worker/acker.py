"""Batched finishes: outcomes of many attempts go to Redis in one script call.

Workers hand their outcome over and move on; the acker flushes whatever gathered in
the same turn of the event loop, so a busy pool pays one round trip for many jobs.
When Redis is away the outcomes are kept and sent again: a finish is never dropped.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import msgspec
import redis.exceptions
import structlog

from rota.client import now_ms
from rota.protocol.scripts import Arg, script
from rota.worker.runner import Outcome
from rota.worker.runtime import PoolRuntime, RedisHealth

__all__ = ["Acker"]

log = structlog.get_logger("rota.pool")

_MAX_BATCH = 500


class Acker:
    def __init__(self, rt: PoolRuntime) -> None:
        self.rt = rt
        self._pending: list[Outcome] = []
        self._event = anyio.Event()
        self._health = RedisHealth("acker")
        self._lock = anyio.Lock()
        self.stale = 0

    def add(self, outcome: Outcome) -> None:
        self._pending.append(outcome)
        self._event.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def run(self) -> None:
        while True:
            await self._event.wait()
            self._event = anyio.Event()
            await anyio.lowlevel.checkpoint()  # let the finishes of this loop turn join the batch
            await self.flush()

    async def flush(self) -> None:
        """Send every pending outcome; retry until Redis takes them."""
        async with self._lock:
            while self._pending:
                batch = self._pending[:_MAX_BATCH]
                with anyio.CancelScope(shield=True):
                    error = await self._send(batch)
                if error is None:
                    del self._pending[: len(batch)]
                else:
                    await anyio.sleep(self._health.failed(error))

    async def _send(self, batch: list[Outcome]) -> BaseException | None:
        """Send one batch; the Redis error that kept it from landing, or None."""
        # One MessagePack argument for the whole batch: Redis clients encode each
        # argument on its own, and seven per job cost more than the job itself.
        args: list[Arg] = [now_ms(), msgspec.msgpack.encode(batch)]
        try:
            conn = self.rt.client.link or self.rt.redis
            stale = await script("finish")(conn, self.rt.keys.prefix, args)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            return exc
        self._health.ok()
        for job_id in stale:
            self.stale += 1
            log.warning("stale finish ignored", job_id=job_id.decode(), pool=self.rt.pool_id)
        return None
