"""A pool stops serving a shard that a change of the shard count retired.

When the record ends a change (``K@G``, see :mod:`rota.protocol.reshard`), the tags of
the old count that the new one does not have are retired: the command moved their
contents away, and a producer that still routes there is refused. A pool that served
them during the change stops, one shard at a time (:func:`retire`):

0. it serves the shard as before until the shard holds no job still to run, of any
   pool (queued, running, scheduled, in retry or waiting: one look a heartbeat
   interval). A job there is one leased after the command's last look, or one a pool
   that died left with its lease: this pool's reaper reclaims its lease, its fetcher
   runs it again and its outcome goes to the shard. A shard left by every pool while
   such a job was there would keep it, with no reaper, for good;
1. its fetcher stops (ended as the pool's drain ends it: a lease under way is handed
   to the workers, never dropped), so that no job is leased there any more;
2. it waits until the pool holds no job of that shard (running, leased and waiting,
   preparing, or an outcome not yet written): those finish and ack to their own shard,
   with the shard's heartbeat extending their leases meanwhile;
3. it cancels the shard's tasks (acker, heartbeat, reaper, scheduler, abort listener),
   which run in a cancel scope of their own inside the pool's one task group;
4. it removes what its heartbeat wrote there (its entry in the pools set and its
   snapshot), and logs ``shard retired``.

The pool's lists of runtimes never shrink (the place a job carries is its shard's):
a retired shard stays at its place, its tasks ended, and is left out of
:attr:`rota.worker.run.PoolRun.serving`, which the follower reads, from the start of
its retirement, and out of :attr:`rota.worker.run.PoolRun.balanced`, which the
rebalancer reads, only once the retirement ended: the jobs that still run there count
against their names' limits until then (left out at once, the new shards' parts added
up to the whole while they ran, a limit of 12 seen at 20).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import structlog

from rota.client.resize import live_jobs
from rota.redis.outage import condition
from rota.wire.redispy import REDIS_ERRORS
from rota.worker.acker import Acker
from rota.worker.fetcher import Fetcher
from rota.worker.heartbeat import Heartbeat
from rota.worker.runtime import PoolRuntime
from rota.worker.waits import Wakes

__all__ = ["POLL", "Retiring", "ShardTasks", "holds", "retire", "until_empty"]

log = structlog.get_logger("rota.pool")

#: Seconds between two looks at whether the pool still holds a job of a shard it
#: retires (in memory: no Redis call).
POLL = 0.05


@dataclass(slots=True)
class ShardTasks:
    """The cancel scopes of one shard's tasks in a pool, whether it started, and
    whether it is retired."""

    #: Set once the shard has registered, listens for aborts and has beaten once: its
    #: fetcher starts then. A shard whose Redis does not answer holds up only its own.
    ready: anyio.Event = field(default_factory=anyio.Event)

    #: Its acker, heartbeat, reaper, scheduler and abort listener (and its start).
    running: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    fetching: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: Set once its fetcher's task, and its other tasks', have ended.
    fetched: anyio.Event = field(default_factory=anyio.Event)
    ended: anyio.Event = field(default_factory=anyio.Event)
    #: Retired, or being retired: the pool serves it no more (no new fetch once empty).
    retired: bool = False
    #: Its retirement ended (its tasks too): the rebalancer covers it no more. Until
    #: then the jobs that run there count against their names' limits, as they run.
    left: bool = False


class Retiring(Protocol):
    """What a retirement needs of the pool's run (rota.worker.run.PoolRun)."""

    @property
    def rt(self) -> PoolRuntime: ...

    @property
    def shards(self) -> Sequence[PoolRuntime]: ...

    @property
    def ackers(self) -> Sequence[Acker]: ...

    @property
    def fetchers(self) -> Sequence[Fetcher]: ...

    @property
    def heartbeats(self) -> Sequence[Heartbeat]: ...

    @property
    def tasks(self) -> Sequence[ShardTasks]: ...

    @property
    def wakes(self) -> Wakes | None: ...

    def ready(self, i: int) -> bool: ...


def holds(run: Retiring, i: int) -> bool:
    """Whether the pool holds a job of shard ``i``: running, leased and not started,
    reading its parents' results, or ended with its outcome not yet written."""
    rt = run.rt
    if any(e.job.shard == i for e in rt.in_flight.values()):
        return True
    if any(job.shard == i for job in rt.handoff.waiting()):
        return True
    if any(job.shard == i for job in rt.preparing.values()):
        return True
    return run.ackers[i].pending > 0


async def retire(run: Retiring, i: int) -> None:
    """Stop serving shard ``i`` once the pool holds none of its jobs (see above)."""
    rt, tasks = run.shards[i], run.tasks[i]
    tag = rt.keys.prefix[:-1]
    await until_empty(rt)
    if run.wakes is not None:
        run.wakes.drop(i)
    run.fetchers[i].leaving = True  # it ends after the fetch under way, if any
    tasks.fetching.cancel()
    while not tasks.fetched.is_set():  # a fetcher waiting on its wake lists: end the wait
        with contextlib.suppress(Exception):
            await run.fetchers[i].unblock()
        with anyio.move_on_after(POLL):
            await tasks.fetched.wait()
    while holds(run, i):  # noqa: ASYNC110 - state of many parts, no one event
        await anyio.sleep(POLL)
    await run.ackers[i].flush()  # one being sent by the acker's task: wait for it
    started = run.ready(i)
    tasks.running.cancel()
    await tasks.ended.wait()
    if rt.repair in rt.watch.repairs:  # nothing of this pool's there to repair any more
        rt.watch.repairs.remove(rt.repair)
    if started:  # a shard that never started holds no heartbeat (Redis away: it expires)
        await run.heartbeats[i].stop()
    tasks.left = True
    log.info("shard retired", pool=run.rt.pool_id, shard=i, tag=tag)


async def until_empty(rt: PoolRuntime) -> None:
    """Return once the shard of ``rt`` holds no job still to run (step 0 above), looking
    once a heartbeat interval; a look Redis does not answer counts as "not yet"."""
    said = False
    while True:
        try:
            if not await live_jobs(rt.shard):
                return
        except Exception as exc:
            if condition(exc) is None and not isinstance(exc, REDIS_ERRORS):
                raise
        if not said:
            log.info(
                "retired shard still holds jobs: serving it until they ran",
                pool=rt.pool_id,
                tag=rt.keys.prefix[:-1],
            )
            said = True
        await anyio.sleep(rt.settings.heartbeat_interval)
