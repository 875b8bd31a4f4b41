"""What the shards of one pool share when they share a server or a cluster's node.

Over several shards a pool keeps a fetcher, heartbeat and scheduler per shard, but the
shards on the first one's server (all of them, but in a cluster) need not each hold a
connection blocked in a wait, or listen for aborts or schedulers alone: they wait on
their wake lists together (:mod:`rota.worker.waits`). In a cluster, the shards of each
node wait together on one subscription (:mod:`rota.worker.nodewaits`), and shard 0's
abort listener hears every shard's aborts (a classic ``PUBLISH`` reaches every node). Either way the
other shards' heartbeats, reapers and timed ticks follow shard 0's look (one command a
server or node) while nothing is there (:mod:`rota.worker.idle`); in a cluster that look
(:mod:`rota.worker.nodelook`) answers the fetchers' safety net and the rebalancer too.
This module makes that wiring, once, at the pool's start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rota.redis.topology import SlotOwnerPool
from rota.worker.fetcher import Fetcher
from rota.worker.heartbeat import Heartbeat
from rota.worker.idle import ShardLook
from rota.worker.nodelook import NodeLook
from rota.worker.nodewaits import NodeWakes
from rota.worker.registry import Periodic
from rota.worker.runtime import PoolRuntime
from rota.worker.scheduler import Scheduler
from rota.worker.waits import SharedWakes, Wakes

__all__ = ["Shared", "share"]


@dataclass
class Shared:
    """``count``: how many shards, the first ones, share the first one's server;
    ``listened``: how many, the first ones, shard 0's abort listener hears for."""

    count: int
    listened: int
    schedulers: list[Scheduler]
    wakes: Wakes | None
    look: ShardLook | None


def share(
    rt: PoolRuntime,
    shards: Sequence[PoolRuntime],
    fetchers: list[Fetcher],
    heartbeats: Sequence[Heartbeat],
    periodic: list[Periodic],
) -> Shared:
    """The schedulers of ``shards`` (the periodic jobs in the first one's), and the wait
    and look they share, set on their fetchers, heartbeats and schedulers."""
    count = sum(1 for r in shards if r.redis is rt.redis)
    together = count > 1
    nodes = isinstance(rt.redis.connection_pool, SlotOwnerPool)
    schedulers = [
        Scheduler(r, periodic if i == 0 else [], listen=not (nodes or (together and i < count)))
        for i, r in enumerate(shards)
    ]
    for heartbeat in heartbeats[1:count]:  # one heartbeat a server reads its memory
        heartbeat.reads_memory = False
    # In a cluster the look is one a node over every shard, which answers the fetchers'
    # safety net and the rebalancer too (see rota.worker.nodelook).
    looked = len(shards) if nodes else count
    look: ShardLook | None = None
    if looked > 1:
        look = NodeLook(rt, shards[:looked]) if nodes else ShardLook(rt, shards[1:looked])
    for heartbeat, scheduler in zip(heartbeats[:looked], schedulers, strict=False):
        heartbeat.look = scheduler.look = look
    # In a cluster the pool's own list: a shard added during the run joins the waits.
    first = fetchers if nodes else fetchers[:count] if together else []
    wakes: Wakes | None = None
    if nodes:
        wakes = NodeWakes(first, schedulers, look if isinstance(look, NodeLook) else None)
    elif together:
        wakes = SharedWakes(rt, [f.wake_keys for f in first], [f.rt.keys.ready for f in first])
    for fetcher in first:
        fetcher.shared = wakes
    # In a cluster a classic PUBLISH reaches every node (the cluster's bus carries it),
    # so shard 0's one SUBSCRIBE hears every shard's abort channel: one listener a pool,
    # not one a shard. On one server the shards on shard 0's server share it.
    listened = len(shards) if nodes else count
    return Shared(count, listened, schedulers, wakes, look)
