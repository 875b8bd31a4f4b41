"""An idle pool over K shards of a cluster: its heartbeats, reapers and scheduler ticks
run in shard 0 only, and one look a node (the read-only function ``look``, flagged
``allow-cross-slot-keys``) spans the other shards of that node, so that its upkeep does
not grow with the shards (see rota.worker.idle)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from redis.crc import key_slot

from rota import JobContext, WorkerPool
from rota.acl import rules
from rota.protocol.keys import Keys
from rota.protocol.render import library
from rota.worker.rounds import BEAT, REAP, TICK, rounds_of
from tests.helpers import pool_settings, quiet_in, rounds, wait_until
from tests.monitoring import TAG, Monitor, idle_pool, primaries
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 6
INTERVAL = 0.2


def _by_shard(seen: list[tuple[bool, list[str]]], tags: list[str]) -> tuple[Counter[str], int]:
    """The commands whose keys all belong to one shard but shard 0, by shard and command
    (the look's calls and the reads inside them left out), and the look's calls."""
    look = library().function("look").lower()
    per: Counter[str] = Counter()
    looks = 0
    for lua, words in seen:
        if words[0].upper() == "FCALL_RO" and words[1].lower() == look:
            looks += 1
            continue
        if lua and words[0].upper() in ("EXISTS", "SISMEMBER"):
            continue  # the look's reads, inside its call
        named = {tags.index(t) for w in words[1:] for t in TAG.findall(w) if t in tags}
        if len(named) == 1 and 0 not in named:
            per[f"{named.pop()} {'lua ' if lua else ''}{words[0].upper()}"] += 1
    return per, looks


@pytest.mark.timeout(120)
async def test_an_idle_pool_sends_one_look_per_node_not_a_round_per_shard(
    cluster: ClusterGroup,
) -> None:
    """Over eight heartbeat intervals, reaper passes and scheduler ticks, an idle pool
    over 6 shards of a 3-primary cluster runs no command in a shard but 0 alone, but
    each node sees the look over its shards (before, each shard had its beat, its
    reaper's check and its scheduler's check)."""
    namespace = "cidle" + str(threading.get_ident() % 10_000)
    # wake_timeout: the fetchers' safety net, past the window
    pool, tags = idle_pool(cluster.url, namespace, K, INTERVAL, wake_timeout=12.0)
    monitor = Monitor(primaries(cluster.servers))
    async with pool.running() as rt:
        await rounds(pool, BEAT, n=2)  # past the start, and shard 0's first look
        counts = rounds_of(rt.pool_id)
        ticks = counts.mark(TICK)
        monitor.start()
        await rounds(pool, BEAT, n=8)
        await rounds(pool, REAP, n=2)
        await wait_until(lambda: counts.since(TICK, ticks, 2))
        await monitor.stop()
    per_node = [_by_shard(s, tags) for s in monitor.seen]
    assert [per for per, _ in per_node] == [Counter()] * len(per_node), per_node
    assert all(looks > 0 for _, looks in per_node), per_node


async def _noop(ctx: JobContext) -> None:
    return None


@pytest.mark.parametrize("refused", [False, True])
@pytest.mark.timeout(120)
async def test_a_node_that_refuses_the_look_keeps_every_round_of_its_shards(
    cluster: ClusterGroup, refused: bool
) -> None:
    """Under the ``worker`` ACL role the look runs (its shards skip their beats); under
    the role without ``FCALL_RO`` every node refuses it, and every shard beats at every
    interval as before the look (a refusal counts as something to do)."""
    namespace = f"crefuse{int(refused)}"
    user, password = f"w{int(refused)}{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    role = [r for r in rules("worker", namespace, K) if not (refused and r == "+fcall_ro")]
    for server in cluster.servers:
        with server.client() as r:
            r.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *role)
    url = cluster.url.replace("://", f"://{user}:{password}@")
    settings = pool_settings(url, namespace, shards=K, heartbeat_interval=INTERVAL)
    pool = WorkerPool(settings=settings)
    pool.job(name="n")(_noop)
    async with pool.running():
        run = pool.current_run
        assert run is not None and run.look is not None
        await rounds(pool, BEAT, n=6)
        skipped = [h.skipped for h in run.heartbeats[1:]]
    assert (not any(skipped)) if refused else all(skipped), skipped


@pytest.mark.timeout(120)
async def test_a_node_that_lost_its_data_gets_the_pool_names_again(cluster: ClusterGroup) -> None:
    """A node other than shard 0's flushed under an idle pool (as one restarted without
    persistence): its shards' beats are quiet and score nobody, so the look tells it
    (the pool's job name is gone from the names there), and the pool registers its
    names, priorities and limits again in those shards."""
    namespace = "clost"
    settings = pool_settings(cluster.url, namespace, shards=K, heartbeat_interval=INTERVAL)
    pool = WorkerPool(settings=settings)
    pool.job(name="n", priority=7)(_noop)
    every = [Keys(namespace, i, K) for i in range(K)]
    owners = [cluster.owner(key_slot(k.prefix.encode())) for k in every]
    node = next(s for s in owners if s.port != owners[0].port)
    there = [k for k, s in zip(every, owners, strict=True) if s.port == node.port]

    def registered() -> bool:
        with node.client(socket_timeout=5) as r:
            return all(r.hget(k.priorities, "n") == b"7" for k in there)

    async with pool.running():
        await quiet_in(pool, every.index(there[0]))
        assert registered()
        with node.client(socket_timeout=5) as r:
            r.flushall()
        await wait_until(registered, within=30)
