"""An idle pool over K shards of a cluster runs one command a shard a look, inside
scripts included: its heartbeat's idle look, its fetchers' safety net and its
rebalancer's check read each shard with one ``EXISTS`` of one look a node an interval
(rota.worker.nodelook), not one look each (three ``EXISTS`` a shard an interval), and
no shard but 0 runs anything else of the pool's while nothing is there."""

from __future__ import annotations

import os
import threading
from collections import Counter

import anyio
import pytest

from rota import JobContext, WorkerPool
from rota.protocol.keys import Keys
from rota.worker.rounds import BEAT
from tests.helpers import pool_settings, rounds
from tests.test_idle_shards import _TAG, _watch
from tests.topology.test_cluster_idle import pool_noise
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 6
INTERVAL = 0.5
#: Heartbeat intervals watched.
BEATS = 8


def _each_shard(seen: list[tuple[bool, list[str]]], tags: list[str]) -> Counter[int]:
    """The commands Redis ran (sent, or run inside a script or function) that name one
    shard but 0 alone, by shard; the look's call (one a node, whatever its shards) and
    its check of the node's data (``SISMEMBER``, one a node) left out."""
    per: Counter[int] = Counter()
    for lua, words in seen:
        command = words[0].upper()
        if command == "FCALL_RO" or (lua and command == "SISMEMBER"):
            continue
        named = {tags.index(t) for w in words[1:] for t in _TAG.findall(w) if t in tags}
        if len(named) == 1 and 0 not in named:
            per[named.pop()] += 1
    return per


async def _noop(ctx: JobContext) -> None:
    return None


@pytest.mark.timeout(120)
async def test_an_idle_pool_runs_one_command_a_shard_an_interval_inside_scripts_too(
    cluster: ClusterGroup,
) -> None:
    """Over eight heartbeat intervals (as many ``wake_timeout``s and scheduler
    intervals), with a limited name (so that the rebalancer checks the queues), each
    shard but 0 of an idle pool over 6 shards of 3 primaries runs about one command an
    interval (the ``EXISTS`` inside its node's look): at most one and a half, where the
    heartbeat's look, the safety net's and the rebalancer's ran three."""
    namespace = "clook" + os.urandom(3).hex()
    settings = pool_settings(
        cluster.url,
        namespace,
        shards=K,
        heartbeat_interval=INTERVAL,
        scheduler_interval=INTERVAL,
        wake_timeout=INTERVAL,
        forget_names_after=0,
    )
    pool = WorkerPool(settings=settings)
    pool.job(name="n", max_concurrency=24)(_noop)
    tags = [Keys(namespace, i, K).prefix[1:-2] for i in range(K)]
    primaries = [s for s in cluster.servers if s.client().info("replication")["role"] == "master"]
    seen: list[list[tuple[bool, list[str]]]] = [[] for _ in primaries]
    stop = threading.Event()
    async with pool.running():
        await rounds(pool, BEAT, n=3)  # past the start, and the rebalancer's first pass
        watchers = [
            threading.Thread(target=_watch, args=(server, into, stop))
            for server, into in zip(primaries, seen, strict=True)
        ]
        for w in watchers:
            w.start()
        await rounds(pool, BEAT, n=BEATS)
        stop.set()
        await pool_noise(primaries)
    for w in watchers:
        await anyio.to_thread.run_sync(w.join, 10)
    per = sum((_each_shard(s, tags) for s in seen), Counter())
    assert set(per) == set(range(1, K)), per  # each shard is looked at
    assert max(per.values()) <= BEATS * 3 // 2 + 2, per
