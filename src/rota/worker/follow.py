"""A pool follows its namespace's shard record (see :mod:`rota.protocol.reshard`).

The record changes when an operator runs ``rota shards resize``: the pool then serves the
union of the old and the new shards (a fetcher, heartbeat, reaper and scheduler each),
and its job names' limits are split over that union again. It reads the record at its
start, each heartbeat interval, and at once when the command announces a change on the
pool-commands channel: one GET of shard 0 a heartbeat interval.

A shard the record no longer names stays served until the pool stops: the change moved
its live jobs away before it ended, so it only costs the pool a wait on its wake lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import structlog

from rota.client.shard import Shard
from rota.protocol.reshard import BadRecord
from rota.redis.outage import condition
from rota.worker.runtime import PoolRuntime

__all__ = ["RecordFollower"]

log = structlog.get_logger("rota.pool")


class Serving(Protocol):
    """What a follower needs of the pool's run (rota.worker.run.PoolRun)."""

    @property
    def rt(self) -> PoolRuntime: ...

    @property
    def shards(self) -> Sequence[PoolRuntime]: ...

    def add_shard(self, shard: Shard) -> None: ...

    def ready(self, i: int) -> bool: ...


class RecordFollower:
    def __init__(self, run: Serving) -> None:
        self.run_ = run
        self._told = anyio.Event()
        self._bad: str | None = None
        run.rt.control.on_reshard = self.told

    def told(self) -> None:
        """The record changed (a message said so): read it now."""
        self._told.set()

    async def run(self) -> None:
        rt = self.run_.rt
        while True:
            with anyio.move_on_after(rt.settings.heartbeat_interval):
                await self._told.wait()
            self._told = anyio.Event()
            try:
                await self.follow()
            except Exception as exc:
                if condition(exc) is None:  # Redis away: the next round reads again
                    raise

    async def follow(self) -> None:
        """Read the record and serve every shard it names; after a change, register
        the pool's names again in every shard, so that limits are split over them."""
        run = self.run_
        admin = run.rt.client.admin
        before = admin.follower.route.record
        try:
            record = await admin.follower.reread()
        except BadRecord as exc:
            if str(exc) != self._bad:  # one line per record written by hand
                log.error("shard record not followed", pool=run.rt.pool_id, error=str(exc))
            self._bad = str(exc)
            return
        self._bad = None
        if record == before:
            return
        served = {id(rt.shard) for rt in run.shards}
        for shard in admin.shards:
            if id(shard) not in served:
                run.add_shard(shard)
        log.info("shard record followed", pool=run.rt.pool_id, record=record.text())
        for rt in list(run.shards):
            if rt.shard in admin.shards and run.ready(rt.position):
                await rt.register()
