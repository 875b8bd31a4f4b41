"""An idle pool over K shards of a cluster sends a number of commands that does not grow
with K: over several ``wake_timeout``s no command names one shard but 0 alone (the
fetchers' safety net and the rebalancer's check read every shard of a node in the one
look of that node), and it holds one waiting connection per node and one listener for
the whole pool (a classic ``PUBLISH`` reaches every node of a cluster); an abort still
reaches a job in a shard on another node, also after the listener's node is gone."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import anyio
import pytest
from redis.crc import key_slot

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.keys import Keys
from rota.protocol.shards import shard_of
from rota.worker.nodewaits import NodeWakes
from rota.worker.rounds import BEAT, REAP
from tests.helpers import pool_settings, rounds, wait_until
from tests.monitoring import Monitor, idle_pool, primaries
from tests.topology.test_cluster_idle import _by_shard
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 6
INTERVAL = 0.2
#: The fetchers' safety net: several of it within the window watched.
WAKE = 0.4


def _connections(cluster: ClusterGroup) -> list[tuple[int, int, int]]:
    """Per primary: connections subscribed to shard channels, to classic channels, and
    blocked in a BLPOP."""
    each = []
    for server in cluster.servers:
        if not server.running:
            continue
        with server.client(socket_timeout=5) as r:
            if r.info("replication")["role"] != "master":
                continue
            listed: list[dict[str, Any]] = r.client_list()
        each.append(
            (
                sum(1 for c in listed if int(c.get("ssub", 0)) > 0),
                sum(1 for c in listed if int(c.get("sub", 0)) > 0),
                sum(1 for c in listed if c.get("cmd") == "blpop"),
            )
        )
    return each


def _one_listener(cluster: ClusterGroup) -> bool:
    """One subscription to the shard channels on every primary, one to classic
    channels in the whole cluster, and no BLPOP."""
    each = _connections(cluster)
    return (
        {s for s, _, _ in each} == {1}
        and sum(c for _, c, _ in each) == 1
        and not any(b for _, _, b in each)
    )


@pytest.mark.timeout(120)
async def test_an_idle_pool_names_no_shard_alone_over_several_wake_timeouts(
    cluster: ClusterGroup,
) -> None:
    """Over eight intervals (four ``wake_timeout``s), with a limited name (so that the
    rebalancer checks the queues), an idle pool over 6 shards of 3 primaries sends no
    command in a shard but 0 alone (the looks left out): before, each shard's ready
    set was read at each of its fetcher's timeouts and its queues at each of the
    rebalancer's checks. One subscription a node, one listener in all."""
    namespace = "cflat" + os.urandom(3).hex()
    pool, tags = idle_pool(cluster.url, namespace, K, INTERVAL, WAKE, max_concurrency=24)
    monitor = Monitor(primaries(cluster.servers))
    async with pool.running():
        await rounds(pool, BEAT, n=3)  # past the start, and the rebalancer's first pass
        await wait_until(lambda: _one_listener(cluster), within=20)
        run = pool.current_run
        assert run is not None
        wakes = run.wakes
        looks = wakes.looks if isinstance(wakes, NodeWakes) else 0
        monitor.start()
        await rounds(pool, BEAT, n=8)
        await rounds(pool, REAP, n=2)
        await monitor.stop()
        assert _one_listener(cluster), _connections(cluster)
        # The safety net ran meanwhile, one look a node a timeout.
        assert isinstance(wakes, NodeWakes) and wakes.looks > looks
    per_node = [_by_shard(s, tags) for s in monitor.seen]
    assert [per for per, _ in per_node] == [Counter()] * len(per_node), per_node


@pytest.mark.timeout(180)
async def test_an_abort_reaches_a_job_on_another_node_through_the_one_listener(
    cluster_group: ClusterGroup,
) -> None:
    """A job in a shard on another node than shard 0's is aborted through the pool's one
    listener (the beat, its fallback, is an interval of 30 s away), and again after
    shard 0's primary died and its replica took over: the listener subscribed again
    there."""
    cluster = cluster_group
    namespace = "cabort" + os.urandom(3).hex()
    shards = 3
    settings = pool_settings(
        cluster.url, namespace, shards=shards, heartbeat_interval=30.0, lease=200.0
    )
    pool = WorkerPool(settings=settings)
    started: set[str] = set()
    cancelled: set[str] = set()

    @pool.job
    async def hold(ctx: JobContext) -> None:
        started.add(ctx.id)
        try:
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            cancelled.add(ctx.id)
            raise

    first = cluster.owner(key_slot(Keys(namespace, 0, shards).prefix.encode()))
    others = [
        i
        for i in range(1, shards)
        if cluster.owner(key_slot(Keys(namespace, i, shards).prefix.encode())) is not first
    ]
    assert others, "every shard on shard 0's node: no other node to abort on"
    ids = [f"held-{n}" for n in range(200) if shard_of(f"held-{n}", shards) == others[0]][:2]

    def listeners() -> int:
        return sum(c for _, c, _ in _connections(cluster))

    async with pool.running(), Client.from_url(cluster.url, namespace, shards=shards) as client:
        await wait_until(lambda: listeners() == 1, within=20)
        await client.enqueue_many([JobSpec(name="hold", job_id=ids[0])])
        await wait_until(lambda: ids[0] in started, within=20)
        await client.abort(ids[0])
        await wait_until(lambda: ids[0] in cancelled, within=10)
        # Shard 0's primary (the listener's node) dies; its replica takes over.
        replica = cluster.replica_of(first)
        first.kill()
        await wait_until(
            lambda: (
                cluster.owner(key_slot(Keys(namespace, 0, shards).prefix.encode())).port
                == replica.port
            ),
            within=60,
        )
        await wait_until(cluster.ok, within=60)
        await wait_until(lambda: listeners() == 1, within=60)
        await client.enqueue_many([JobSpec(name="hold", job_id=ids[1])])
        await wait_until(lambda: ids[1] in started, within=30)
        await client.abort(ids[1])
        await wait_until(lambda: ids[1] in cancelled, within=10)
