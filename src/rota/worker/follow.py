"""A pool follows its namespace's shard record (see :mod:`rota.protocol.reshard`).

The record changes when an operator runs ``rota shards resize``: the pool then serves the
union of the old and the new shards (a fetcher, heartbeat, reaper and scheduler each),
and its job names' limits are split over that union again. It reads the record at its
start, each heartbeat interval, and at once when the command announces a change on the
pool-commands channel: one GET of shard 0 a heartbeat interval.

When a record ends a change (``K@G``), the shards it no longer names are retired: the
pool stops serving each once it holds none of its jobs (:mod:`rota.worker.retire`).
Every read compares what the pool serves with what the record names, so that a shard
missed by one read (the pool was starting) is added or retired by the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import structlog

from rota.client.shard import Shard
from rota.protocol.reshard import BadRecord
from rota.redis.outage import condition
from rota.worker.retire import Retiring
from rota.worker.runtime import PoolRuntime

__all__ = ["RecordFollower"]

log = structlog.get_logger("rota.pool")


class Serving(Retiring, Protocol):
    """What a follower needs of the pool's run (rota.worker.run.PoolRun): what a
    retirement does, the shards it serves, and a shard more or less."""

    @property
    def serving(self) -> Sequence[PoolRuntime]: ...

    def add(self, shard: Shard) -> int: ...

    def start_retiring(self, i: int) -> bool: ...


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
        if not record.changing:  # a change ended: what the old count alone had is retired
            named = {id(shard) for shard in admin.shards}
            for rt in run.serving:
                if id(rt.shard) not in named:
                    self.retire(rt.position)
        served = {id(rt.shard) for rt in run.serving}
        for shard in admin.shards:
            if id(shard) not in served:
                self.add(shard)
        if record == before:
            return
        log.info("shard record followed", pool=run.rt.pool_id, record=record.text())
        for rt in list(run.serving):
            if rt.shard in admin.shards and run.ready(rt.position):
                await rt.register()

    def add(self, shard: Shard) -> None:
        """Serve ``shard`` too, from now on: a change of the namespace's shard count
        named it (see :meth:`rota.worker.run.PoolRun.add`)."""
        run = self.run_
        if run.rt.stopping.is_set():
            return
        i = run.add(shard)
        log.info("shard added", pool=run.rt.pool_id, shard=i, tag=shard.keys.prefix[:-1])

    def retire(self, i: int) -> None:
        """Serve shard ``i`` no more (see :mod:`rota.worker.retire`); one that never
        started ends at once."""
        run = self.run_
        tasks = run.tasks[i]
        if tasks.retired or i == 0:  # shard 0 is in every count's set
            return
        tasks.retired = True
        if not (run.ready(i) and run.start_retiring(i)):
            tasks.fetching.cancel()
            tasks.running.cancel()
            tasks.left = True
            tag = run.shards[i].keys.prefix[:-1]
            log.info("shard retired", pool=run.rt.pool_id, shard=i, tag=tag)
