"""An idle pool over K shards of a cluster runs one command a shard a look, inside
scripts included: its heartbeat's idle look, its fetchers' safety net and its
rebalancer's check read each shard with one ``EXISTS`` of one look a node an interval
(rota.worker.nodelook), not one look each (three ``EXISTS`` a shard an interval), and
no shard but 0 runs anything else of the pool's while nothing is there; the rebalancer
reads the queues from that look and still passes once a job waits."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from rota import Client, WorkerPool
from rota.worker.nodelook import NodeLook
from rota.worker.rounds import BEAT
from tests.helpers import pool_settings, rounds, wait_until
from tests.monitoring import TAG, Monitor, idle_pool, primaries
from tests.test_rebalance import NAME, Ledger, _in_shard
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
        named = {tags.index(t) for w in words[1:] for t in TAG.findall(w) if t in tags}
        if len(named) == 1 and 0 not in named:
            per[named.pop()] += 1
    return per


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
    pool, tags = idle_pool(cluster.url, namespace, K, INTERVAL, INTERVAL, max_concurrency=24)
    monitor = Monitor(primaries(cluster.servers))
    async with pool.running():
        await rounds(pool, BEAT, n=3)  # past the start, and the rebalancer's first pass
        monitor.start()
        await rounds(pool, BEAT, n=BEATS)
        await monitor.stop()
    per = sum((_each_shard(s, tags) for s in monitor.seen), Counter())
    assert set(per) == set(range(1, K)), per  # each shard is looked at
    assert max(per.values()) <= BEATS * 3 // 2 + 2, per


@pytest.mark.timeout(120)
async def test_the_rebalancer_reads_the_look_and_passes_once_a_job_waits(
    cluster: ClusterGroup,
) -> None:
    """The holder skips its passes while the look a node finds nothing of the limited
    name (its queues read in that look, not by a call of their own); jobs enqueued
    then in a shard whose part is 0 are seen by the next look, and the pass after it
    gives that shard the part: they run, one at a time."""
    namespace = "clookbal" + os.urandom(3).hex()
    shards = 4
    settings = pool_settings(
        cluster.url,
        namespace,
        shards=shards,
        concurrency=20,
        heartbeat_interval=INTERVAL,
        scheduler_interval=INTERVAL,
        wake_timeout=INTERVAL,
    )
    ledger = Ledger()
    ledger.gate.set()
    pool = WorkerPool(settings=settings)
    pool.job(name=NAME, max_concurrency=1)(ledger.run)
    async with Client.from_url(cluster.url, namespace, shards=shards) as client, pool.running():
        run = pool.current_run
        assert run is not None and isinstance(run.look, NodeLook)
        look = run.look
        await wait_until(lambda: run.rebalancer.skipped >= 2, within=30)
        assert look.looked_names == (NAME,)
        await client.enqueue_many(_in_shard(3, 2))
        await wait_until(lambda: ledger.done == 2, within=30)
    assert ledger.most == 1
