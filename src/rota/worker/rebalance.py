"""The rebalancer: one pool of a namespace over several shards moves the parts of its
concurrency limits and rates toward the shards where jobs wait
(:mod:`rota.client.balance`, :mod:`rota.client.rate_shares`).

Every pool over several shards runs one; the one that holds the lease in shard 0
(``{ns}:rebalancer``, taken with ``SET NX PX`` of three heartbeat intervals and renewed
at each of its passes, one per heartbeat interval) passes, the others only try to take
the lease. A pool that stops gives the lease up, so another takes it at its next beat;
one that dies leaves it to run out (three intervals).

Which shards a pass covers is :attr:`Rebalancer.served`, one function: the shards the
pool serves, whatever they are (the namespace's K, or the old and new shards together
while its count changes), and those it is still retiring after a change (jobs run
there: they count against the whole).

An idle namespace is not passed over again and again: before each pass the holder asks
each server with one ``EXISTS`` whether a queue, a fair queue or a running set of a
limited name holds anything in the shards it keeps. In a cluster it asks nothing
itself: the pool's one look a node (rota.worker.nodelook) reads those keys too, and the
holder passes right after a look, once a heartbeat interval, on its answer (a shard
whose node did not answer is read as before: one ``look`` a node, else an ``EXISTS``
a shard). While none does, and the lease, the wholes and the shards are those of the
last pass, which saw the namespace idle too (and so left the parts evenly placed), the
pass is skipped (one in :data:`FULL_EVERY` still runs, for parts written by hand). A
job enqueued anywhere makes the next check say so: it waits for a pass no longer than
it did, one heartbeat interval at most.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
import structlog

from rota.client.balance import balance, lead, leave, read_totals
from rota.client.rate_shares import read_rate_totals
from rota.protocol import read_calls
from rota.protocol.calls import Scope
from rota.redis.outage import MEANING, condition
from rota.redis.topology import SlotOwnerPool, located
from rota.wire.redispy import REDIS_ERRORS
from rota.worker.nodelook import QUEUED, NodeLook, queue_keys
from rota.worker.runtime import PoolRuntime

__all__ = ["FULL_EVERY", "Rebalancer"]

log = structlog.get_logger("rota.limits")

#: An idle namespace still gets one pass in this many heartbeat intervals (for parts
#: written by hand, which only a pass reads).
FULL_EVERY = 60


class Rebalancer:
    """``served()``: the runtimes of the shards the pool serves, shard 0 first."""

    def __init__(
        self,
        rt: PoolRuntime,
        served: Callable[[], Sequence[PoolRuntime]],
        look: NodeLook | None = None,
    ) -> None:
        self.rt = rt
        self.served = served
        #: The pool's look over the nodes of a cluster: the pass follows it, and reads
        #: the queues from its answer (None: one server, or one shard).
        self.look = look
        self.number = 0  # the lease's number while this pool holds it
        self.passes = 0
        #: What the last pass ran on (lease, wholes, shards) when it saw nothing queued
        #: or running; None: it did not, or the pass did not end.
        self._quiet: tuple[object, ...] | None = None
        self.skipped = 0  # passes skipped since the last one that ran

    @property
    def _home(self) -> Scope:
        return self.rt.shard.scope

    async def run(self) -> None:
        """Pass once a heartbeat interval (the first at once), riding out errors: a pass
        cut short by a shard that does not answer leaves the parts where they are."""
        while True:
            began = anyio.current_time()
            try:
                await self.step()
            except Exception as exc:
                cond = condition(exc)
                if cond is None and not isinstance(exc, REDIS_ERRORS):
                    raise
                log.info(
                    "limits not rebalanced this beat",
                    pool=self.rt.pool_id,
                    why=MEANING[cond] if cond is not None else str(exc),
                )
            await self._until_next(began)

    async def _until_next(self, began: float) -> None:
        """Wait for the next pass, one heartbeat interval after ``began``: in a cluster
        until the next look, and on until one ends a look's period short of it or later
        (so that the pass reads an answer as fresh as its own check was, and passes no
        further apart than an interval), never longer than two intervals."""
        interval = self.rt.settings.heartbeat_interval
        look = self.look
        if look is None:
            await anyio.sleep(interval)
            return
        with anyio.move_on_after(2 * interval):
            await look.after_look()
            while anyio.current_time() - began < interval - look.period:
                await look.after_look()

    async def step(self) -> None:
        """Take or renew the lease; holding it, pass over the shards served (none
        while the pool serves one shard: there is nothing to move)."""
        if len(self.served()) < 2:
            if self.number:
                await self.stop()
            return
        ms = int(self.rt.settings.heartbeat_interval * 3000)
        number = await lead(self._home, self.rt.pool_id, ms)
        if number != self.number and number:
            log.info("this pool rebalances the limits", pool=self.rt.pool_id, lease=number)
        self.number = number
        if not number:
            return
        totals, rates = await read_totals(self._home), await read_rate_totals(self._home)
        served = self.served()
        state = (number, totals, rates, [id(r.shard) for r in served])
        idle = bool(totals or rates) and await _idle(served, [*totals, *rates], self.look)
        if idle and state == self._quiet and self.skipped < FULL_EVERY - 1:
            self.skipped += 1
            return
        self._quiet, self.skipped = None, 0
        scopes = [r.shard.scope for r in served]
        if await balance(scopes, number, totals, rates, self.rt.pool_id):
            self.passes += 1
            self._quiet = state if idle else None
        else:
            self.number = 0  # fenced off: its lease ended (see balance)

    async def stop(self) -> None:
        """Give the lease up, so that another pool passes at its next beat."""
        if not self.number:
            return
        with anyio.move_on_after(2, shield=True):
            try:
                await leave(self._home, self.rt.pool_id)
            except Exception as exc:
                if condition(exc) is None and not isinstance(exc, REDIS_ERRORS):
                    raise
        self.number = 0


async def _idle(
    served: Sequence[PoolRuntime], names: Sequence[str], look: NodeLook | None = None
) -> bool:
    """Whether no queue, fair queue or running set of ``names`` holds anything in the
    shards ``served``: one command per server or cluster node. The shards that share a
    connection share a server (one ``EXISTS`` over all their keys, as their wake lists'
    ``BLPOP`` does); in a cluster each shard has its own, and the shards a node serves
    (as their connections last located it) are read together by the read-only function
    ``look`` (see rota.worker.idle). A node that refuses it (or a slot moved) is read
    shard by shard, one ``EXISTS`` each, as before. ``look``: the pool's look over the
    nodes, which reads ``names``' keys from its next look on; the shards its last look
    answered for, over these names, are not read again."""
    if look is not None:
        look.names = tuple(sorted(set(names)))
        if look.looked_names == look.names:
            answered = [(r, look.holds(r, QUEUED)) for r in served]
            if any(held for _, held in answered):
                return False
            served = [r for r, held in answered if held is None]
    servers: dict[object, list[PoolRuntime]] = {}
    for r in served:
        servers.setdefault(located(r.redis) or id(r.redis), []).append(r)

    for group in servers.values():
        if len(group) > 1 and isinstance(group[0].redis.connection_pool, SlotOwnerPool):
            found = await read_calls.look(
                group[0].shard.scope, [queue_keys(r, names) for r in group]
            )
            if found is not None:
                if found:
                    return False
                continue
            for r in group:  # refused: shard by shard
                if await r.redis.exists(*queue_keys(r, names)):
                    return False
            continue
        if await group[0].redis.exists(*[k for r in group for k in queue_keys(r, names)]):
            return False
    return True
