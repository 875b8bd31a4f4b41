"""One look a cluster node an interval, for everything an idle pool asks of its shards.

An idle pool over K shards of a cluster asked the same nodes three things, each with a
call of the read-only function ``look`` a node: its heartbeat (a lease or a scored pool
in the shards but 0, rota.worker.idle), its fetchers' safety net (a name in a ready set,
rota.worker.nodewaits) and its rebalancer (a queue, fair queue or running set of a
limited name, rota.worker.rebalance); its scheduler asked a fourth time (a scheduled,
retry or expiring job) and once a minute a fifth (a dead job). Each call ran one
``EXISTS`` a shard inside: the commands Redis ran still grew with K.

:class:`NodeLook` asks them all at once: every :attr:`NodeLook.period` one call a node
(``lua/look.lua``, its mode by kind) over every kind of key of every shard the node
serves, which runs one ``EXISTS`` a shard over all of them, and more only in a shard
that holds something (one a kind until the count is accounted for). The heartbeats,
reapers and schedulers of the shards but 0 read its last answer as they read
:class:`rota.worker.idle.ShardLook`'s; the fetchers' waits are told after each look
(:meth:`NodeLook.listen`); the rebalancer passes after a look, at most one heartbeat
interval after its last pass.

The period is the shortest of ``heartbeat_interval``, ``wake_timeout`` and
``scheduler_interval``, so that each promise the separate looks kept holds: a lease in
an idle shard is seen within one heartbeat interval (rota.worker.idle), a job pushed by
a producer that does not ring starts within ``wake_timeout`` (rota.worker.nodewaits),
a scheduled job whose token was lost waits one scheduler interval more at most
(rota.worker.scheduler), and a job enqueued anywhere makes the rebalancer pass within a
heartbeat interval (rota.worker.rebalance).

The shards a node serves are as their connections last located them (no command to
locate them); what a node answers holds for those shards alone. A node that does not
answer within half a period, refuses (Redis 6.2, scripts without functions, an ACL
without ``FCALL_RO``) or names a key of a slot it no longer serves (moved) counts as
holding everything: its shards but 0 beat, reap and tick as before, its fetchers read
their own ready sets at their timeouts, and the rebalancer reads their queues itself,
until a look answers. So does every shard until the first look. The look also asks
whether the names of a shard but 0 on the node still hold one of the pool's job names:
when not, the node lost its data (restarted without persistence, flushed), and the pool
registers its names again in that node's shards.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import anyio
import structlog

from rota.protocol import read_calls
from rota.redis.outage import REDIS_ERRORS, condition
from rota.redis.topology import located
from rota.worker.idle import ShardLook
from rota.worker.runtime import PoolRuntime

__all__ = ["NodeLook", "queue_keys"]

log = structlog.get_logger("rota.pool")

#: The kinds of keys asked, as the bits of each shard's answer, in the order the look
#: asks them once a shard holds something (the kinds an idle namespace keeps longest
#: first: a dead job stays for days, a job scheduled for later until it is due).
DEAD, SCHEDULED, BUSY, READY, QUEUED = 1, 2, 4, 8, 16
EVERYTHING = DEAD | SCHEDULED | BUSY | READY | QUEUED


def queue_keys(rt: PoolRuntime, names: Sequence[str]) -> list[str]:
    """The queue, fair queue and running set of each of ``names`` in ``rt``'s shard:
    what the rebalancer asks of a limited name (held: it passes)."""
    k = rt.keys
    return [key for n in names for key in (k.queue(n), k.fair(n), k.running(n))]


class NodeLook(ShardLook):
    """The look of a pool over its shards ``every`` of a cluster (shard 0 first), one
    call a node each :attr:`period`; :meth:`run` makes it."""

    def __init__(self, first: PoolRuntime, every: Sequence[PoolRuntime]) -> None:
        super().__init__(first, every[1:], nodes=True)
        self.every = list(every)
        #: The limited names whose queues, fair queues and running sets the look reads
        #: too (set by the rebalancer); :attr:`looked_names`: those the last look read.
        self.names: tuple[str, ...] = ()
        self.looked_names: tuple[str, ...] = ()
        #: What each shard's node answered at the last look (position -> kinds), for
        #: the shards whose node answered.
        self.answers: dict[int, int] = {}
        self.looks = 0  # node calls answered so far
        self._listeners: list[Callable[[], None]] = []
        self._looked = anyio.Event()

    @property
    def period(self) -> float:
        """Seconds between two looks: the shortest of the intervals it answers for."""
        s = self.first.settings
        return min(s.heartbeat_interval, s.wake_timeout, s.scheduler_interval)

    def listen(self, told: Callable[[], None]) -> None:
        """Call ``told`` after each look."""
        self._listeners.append(told)

    def holds(self, rt: PoolRuntime, kind: int) -> bool | None:
        """Whether the last look found ``kind`` in ``rt``'s shard; None when its node
        did not answer (or the look does not cover it)."""
        i = rt.position
        if i >= len(self.every) or self.every[i] is not rt or i not in self.answers:
            return None
        return bool(self.answers[i] & kind)

    async def look(self) -> None:
        """Nothing: :meth:`run` looks, at its own period."""

    async def look_scheduled(self) -> None:
        """Nothing: :meth:`run` looks, at its own period."""

    async def look_dead(self) -> None:
        """Nothing: :meth:`run` looks, at its own period."""

    async def after_look(self) -> None:
        """Return once the next look has answered."""
        await self._looked.wait()

    async def run(self) -> None:
        """Look every :attr:`period`, the first at once."""
        while True:
            await self.look_all()
            await anyio.sleep(self.period)

    async def look_all(self) -> None:
        """One call a node; then tell the heartbeats, schedulers and listeners."""
        names = self.names
        answers: dict[int, int] = {}

        async def node(shards: list[PoolRuntime]) -> None:
            got = await self._node(shards, names)
            if got is not None:
                answers.update((r.position, kinds) for r, kinds in zip(shards, got, strict=True))

        async with anyio.create_task_group() as tg:
            for shards in self._by_node(self.every):
                tg.start_soon(node, shards)
        self.answers, self.looked_names = answers, names
        held = {i: answers.get(i, EVERYTHING) for i in self._every}
        self.busy = {i for i, kinds in held.items() if kinds & BUSY}
        self.scheduled = {i for i, kinds in held.items() if kinds & SCHEDULED}
        self.dead = {i for i, kinds in held.items() if kinds & DEAD}
        for told in self._listeners:
            told()
        looked, self._looked = self._looked, anyio.Event()
        looked.set()

    def _kinds(self, rt: PoolRuntime, names: Sequence[str]) -> list[list[str]]:
        """The keys of each kind the look reads in ``rt``'s shard (in the order of the
        bits); shard 0 beats, reaps and ticks at every round: its ready set and queues."""
        k = rt.keys
        queues = queue_keys(rt, names)
        if rt.position == 0:
            return [[], [], [], [k.ready], queues]
        return [
            [k.dead],
            [k.scheduled, k.retry, k.expiring],
            [k.leased, k.pools],
            [k.ready],
            queues,
        ]

    def _by_node(self, shards: Sequence[PoolRuntime]) -> list[list[PoolRuntime]]:
        """``shards`` by the node their connections last located (a shard not located
        now is looked at alone, through its own connection, which locates it)."""
        nodes: dict[tuple[str, int], list[PoolRuntime]] = defaultdict(list)
        alone: list[list[PoolRuntime]] = []
        for r in shards:
            owner = located(r.redis)
            if owner is None:
                alone.append([r])
            else:
                nodes[owner].append(r)
        return [*nodes.values(), *alone]

    async def _node(self, shards: list[PoolRuntime], names: Sequence[str]) -> list[int] | None:
        """What each of ``shards`` (of one node) holds, by kind; None when the node does
        not say (see the module) or lost its data (its shards register again). Its
        errors are not shard 0's: they end no beat."""
        kinds = [self._kinds(r, names) for r in shards]
        marked = [r for r in shards if r.position != 0]
        name = min(self.first.handlers, default="")
        marker = (marked[0].keys.names, name) if name and marked else ("", "")
        with anyio.move_on_after(self.period / 2):
            try:
                got = await read_calls.look_kinds(shards[0].shard.scope, kinds, marker)
            except Exception as exc:
                if isinstance(exc, REDIS_ERRORS) or condition(exc) is not None:
                    return None
                raise
            if got == []:  # lost its data: the shard asked is registered last
                for rt in reversed(marked):
                    await rt.register(keep=True)
                log.warning(
                    "a cluster node had lost this pool's job names (restarted without"
                    " persistence, or flushed): registered them again in its shards",
                    pool=self.first.pool_id,
                )
                return None
            if got is None or len(got) != len(shards):
                return None
            self.looks += 1
            return got
        return None
