"""One look a heartbeat for the idle shards of a pool on one server (or cluster node).

A pool over K shards on one server (no cluster) beat, reaped and ticked in every shard:
about 1.4 commands a second per shard while nothing happens anywhere. What each loop of
shard i >= 1 has to do there depends on a few keys of that shard only:

- the reaper reclaims leases of the names in ``{tag}:leased`` and forgets the pools
  scored in ``{tag}:pools`` (on one server, only pools that score themselves in every
  shard do so in a shard but 0: an older version, another language);
- the heartbeat extends the pool's own leases there, and notes Redis's clock in
  ``{tag}:beats`` so that the reaper's calm rule (docs/protocol.md, "Lost leases") knows
  whether beats land; that clock matters only where there is a lease to reclaim, so
  where ``{tag}:leased`` names something;
- the scheduler's timer moves the jobs of ``{tag}:scheduled``, ``retry`` and
  ``expiring`` (a wake token starts it for a new one: see rota.worker.scheduler), and
  once a minute trims ``{tag}:dead``.

:class:`ShardLook` asks for all of them with one ``EXISTS`` over those keys of every
such shard (a multi-key command spans hash tags on one server, as the fetchers' shared
check of the ready sets does), once a heartbeat interval from shard 0's heartbeat, and
once a scheduler tick (and a trim) from shard 0's scheduler. While the answer is 0 the
other shards' heartbeats skip their beat (unless the pool holds a job there), their
reapers skip their pass and their schedulers' timed ticks (and trims) skip theirs: no
command per shard. Once something is there, they all do what they did before, until it
is gone.

Why nothing is lost or reclaimed twice:

- A pool that leases in an idle shard holds the job, so its heartbeat beats there at its
  next interval (the lease outlasts one). If it dies first, the job's name is in
  ``{tag}:leased``: the next look of every other pool (within one interval) finds it,
  and from then on they beat and reap there as before; the first beat after the quiet
  starts the calm clock afresh (a gap), so the reaper waits two intervals as after an
  outage. That calm ends at most four intervals after the lease (a look, a beat, two
  intervals), before a default lease (six intervals) does: the lease is reclaimed at
  the first pass after its deadline, as before (a lease under four intervals waits for
  the calm, never longer).
- A Redis paused or stopped holds every beat back, the pool's own included; a shard with
  a lease is one where every pool beats, as before, so the calm rule sees the gap as
  before. A shard without a lease has nothing to reclaim.
- Liveness is shard 0's score (``{ns}:pools``): a pool's beats there move at every
  interval, and the reapers of shard 0 forget a pool that stops. A dead pool's leases in
  another shard are reclaimed there by their deadline, which needs no score.
- A Redis that lost its data (restarted without persistence) is seen by shard 0's beat,
  which registers the pool's names again in every shard of the look, not in shard 0
  alone. In a cluster a node may lose its data alone: the look there asks whether the
  names of its first shard still hold one of the pool's job names, and when not the
  pool registers its names again in that node's shards.

In a cluster a multi-key command cannot span slots: there
:class:`rota.worker.nodelook.NodeLook` makes the look, one call a node an interval,
which answers the fetchers' safety net and the rebalancer too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from rota.worker.runtime import PoolRuntime

__all__ = ["ShardLook"]

log = structlog.get_logger("rota.pool")

KeysOf = Callable[[PoolRuntime], tuple[str, ...]]


class ShardLook:
    """What the shards ``others`` hold for the pool's upkeep, read with one command each
    for the heartbeat and the scheduler on the server of shard 0 ``first``; ``nodes``:
    one a node of a cluster (:class:`rota.worker.nodelook.NodeLook`)."""

    def __init__(
        self, first: PoolRuntime, others: Sequence[PoolRuntime], *, nodes: bool = False
    ) -> None:
        self.first = first
        self.others = list(others)
        self.nodes = nodes
        self._every = frozenset(r.position for r in self.others)
        #: The shards where some shard of their server holds a lease or a scored pool:
        #: they beat and reap. Every one until the first look, so that nothing is
        #: skipped before it is known.
        self.busy: set[int] = set(self._every)
        #: The shards where some shard of their server holds a scheduled, retry or
        #: expiring job: they tick.
        self.scheduled: set[int] = set(self._every)
        #: The shards where some shard of their server holds a dead job: they trim their
        #: dead set (once a minute).
        self.dead: set[int] = set(self._every)

    def covers(self, rt: PoolRuntime) -> bool:
        """Whether ``rt`` is one of the shards the look reads for."""
        return any(r is rt for r in self.others)

    def _quiet(self, rt: PoolRuntime, held: set[int]) -> bool:
        """``rt`` is one of the look's shards, not in ``held``, and Redis answers."""
        return rt.position in self._every and rt.position not in held and rt.watch.current is None

    def idle(self, rt: PoolRuntime) -> bool:
        """Whether ``rt``'s heartbeat and reaper may skip their round: the look found
        nothing, and Redis answers. While a condition lasts every round goes to Redis
        as before: a round that skips would tell the watch that Redis takes commands
        again (each task's success ends the episode), and the heartbeat is its probe."""
        return self._quiet(rt, self.busy)

    def nothing_scheduled(self, rt: PoolRuntime) -> bool:
        """Whether ``rt``'s scheduler may skip a tick at its timer (as :meth:`idle`)."""
        return self._quiet(rt, self.scheduled)

    def nothing_dead(self, rt: PoolRuntime) -> bool:
        """Whether ``rt``'s scheduler may skip its trim of the dead set (as :meth:`idle`)."""
        return self._quiet(rt, self.dead)

    async def look(self) -> None:
        """Read whether the other shards need their heartbeat and reaper."""
        self.busy = await self._holding(lambda r: (r.keys.leased, r.keys.pools), known=True)

    async def look_scheduled(self) -> None:
        """Read whether the other shards' schedulers have anything to move."""
        self.scheduled = await self._holding(
            lambda r: (r.keys.scheduled, r.keys.retry, r.keys.expiring)
        )

    async def look_dead(self) -> None:
        """Read whether the other shards' dead sets have anything to trim."""
        self.dead = await self._holding(lambda r: (r.keys.dead,))

    async def _holding(self, keys_of: KeysOf, *, known: bool = False) -> set[int]:
        """The other shards, when their server holds one of the keys ``keys_of`` names
        in its shards (``known``: in a cluster, see NodeLook; on one server shard 0's
        beat tells whether Redis lost its data)."""
        keys = [k for r in self.others for k in keys_of(r)]
        found = bool(await self.first.redis.exists(*keys)) if keys else False
        return set(self._every) if found else set()

    async def register_again(self) -> None:
        """Redis lost its data (shard 0's beat says so): the other shards' job names,
        priorities and limits are written again too, as their beats no longer score the
        pool there to tell it."""
        for rt in self.others:
            await rt.register(keep=True)
