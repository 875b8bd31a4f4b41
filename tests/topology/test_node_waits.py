"""An idle pool over K shards of a cluster waits with one connection per node (an
``SSUBSCRIBE`` to its shards' wake channels there), not a ``BLPOP`` per shard, and no
job waits for the safety net: not after an enqueue into any shard, not after the slot
of a shard moved to another node under the waiting pool.

The pools wait 30 s on their wake lists, so a lost wake-up shows as a job that does
not start within seconds (as in tests/test_wakeups.py)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import anyio
import pytest
from redis.crc import key_slot

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.acl import rules
from rota.protocol.keys import Keys
from rota.protocol.shards import shard_of, shard_tags
from rota.worker.nodewaits import NodeWakes
from tests.helpers import pool_settings, wait_until
from tests.topology.test_cluster import migrate_slot
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

# The pools' wake_timeout: far beyond any wait here, and under the connections'
# socket_timeout (15 s), which a per-shard BLPOP of a pool in a cluster must not outlast.
SAFETY_NET = 12.0
K = 6


def _clients(cluster: ClusterGroup) -> dict[int, list[dict[str, Any]]]:
    """``CLIENT LIST`` of each primary, by port."""
    listed = {}
    for server in cluster.servers:
        with server.client(socket_timeout=5) as r:
            listed[server.port] = r.client_list()
    return listed


def _waits(cluster: ClusterGroup) -> dict[int, tuple[int, int]]:
    """Per primary: connections blocked in a BLPOP, and connections subscribed to shard
    channels."""
    return {
        port: (
            sum(1 for c in clients if c.get("cmd") == "blpop"),
            sum(1 for c in clients if int(c.get("ssub", 0)) > 0),
        )
        for port, clients in _clients(cluster).items()
    }


def _one_per_shard(shards: int, prefix: str = "job") -> list[str]:
    """A job id for each shard, in shard order."""
    ids: dict[int, str] = {}
    for i in itertools.count():
        ids.setdefault(shard_of(f"{prefix}-{i}", shards), f"{prefix}-{i}")
        if len(ids) == shards:
            return [ids[s] for s in range(shards)]
    raise AssertionError  # pragma: no cover


async def _run_all(client: Client, ran: set[str], ids: list[str]) -> None:
    """Enqueue ``ids`` one at a time; each must run long before the safety net."""
    for job_id in ids:
        await client.enqueue_many([JobSpec(name="work", job_id=job_id)])
        await wait_until(lambda job_id=job_id: job_id in ran, within=SAFETY_NET / 3)  # type: ignore[misc]


def _pool(cluster: ClusterGroup, ns: str, shards: int, ran: set[str]) -> WorkerPool:
    settings = pool_settings(cluster.url, ns, shards=shards, wake_timeout=SAFETY_NET)
    pool = WorkerPool(settings=settings)

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.add(ctx.id)

    return pool


@pytest.mark.timeout(120)
async def test_an_idle_pool_waits_with_one_connection_per_node(cluster: ClusterGroup) -> None:
    ns = "nw" + os.urandom(4).hex()
    ran: set[str] = set()
    pool = _pool(cluster, ns, K, ran)
    async with pool.running(), Client.from_url(cluster.url, ns, shards=K) as client:
        # Every primary serves K / 3 shards: one subscription there, and no BLPOP.
        await wait_until(lambda: set(_waits(cluster).values()) == {(0, 1)}, within=20)
        await _run_all(client, ran, _one_per_shard(K))
        await _run_all(client, ran, _one_per_shard(K, "again")[::-1])
        assert set(_waits(cluster).values()) == {(0, 1)}


@pytest.mark.timeout(120)
async def test_a_slot_moved_under_a_waiting_pool(cluster: ClusterGroup) -> None:
    ns = "nw" + os.urandom(4).hex()
    shards = 3
    ran: set[str] = set()
    pool = _pool(cluster, ns, shards, ran)
    tags = shard_tags(ns, shards)
    async with pool.running(), Client.from_url(cluster.url, ns, shards=shards) as client:
        await wait_until(lambda: sum(s for _, s in _waits(cluster).values()) == 3, within=20)
        # Shard 1's slot goes to the node of shard 2: that node now serves two shards.
        slot = key_slot(("{" + tags[1] + "}:").encode())
        target = cluster.owner(key_slot(("{" + tags[2] + "}:").encode()))
        await anyio.to_thread.run_sync(migrate_slot, cluster, slot, target)
        await wait_until(lambda: sum(s for _, s in _waits(cluster).values()) == 2, within=20)
        assert {b for b, _ in _waits(cluster).values()} == {0}
        ids = [i for i in (f"moved-{n}" for n in range(40)) if shard_of(i, shards) == 1][:3]
        await _run_all(client, ran, ids)
        await _run_all(client, ran, _one_per_shard(shards, "after"))


@pytest.mark.parametrize(("shards", "refused"), [(3, False), (6, False), (6, True)])
@pytest.mark.timeout(120)
async def test_a_producer_that_does_not_ring_is_served_at_the_timeout(
    cluster: ClusterGroup, shards: int, refused: bool
) -> None:
    """Plain commands that push the token but do not ring (docs/protocol.md, (a)
    without SPUBLISH), into each shard in turn: the waiting pool finds the job at the
    next safety look of the shard's node (one a node a ``wake_timeout``), also in a
    shard its node looks at through another (6 shards on 3 primaries); a pool whose
    ACL refuses the look (no ``FCALL_RO``) reads each shard's ready set at its own
    timeout, as before the look."""
    ns = "nw" + os.urandom(4).hex()
    ran: set[str] = set()
    url = cluster.url
    if refused:
        user, password = "w" + os.urandom(3).hex(), os.urandom(8).hex()
        role = [r for r in rules("worker", ns, shards) if r != "+fcall_ro"]
        for server in cluster.servers:
            with server.client(socket_timeout=5) as r:
                r.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *role)
        url = url.replace("://", f"://{user}:{password}@")
    settings = pool_settings(url, ns, shards=shards, wake_timeout=1.0)
    pool = WorkerPool(settings=settings)

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.add(ctx.id)

    async with pool.running():
        await wait_until(lambda: {s for _, s in _waits(cluster).values()} == {1}, within=20)
        for shard in range(shards):
            keys = Keys(ns, shard, shards)
            job_id = f"plain-{shard}"
            with cluster.owner(key_slot(keys.prefix.encode())).client(socket_timeout=5) as r:
                pipe = r.pipeline(transaction=True)
                pipe.hset(
                    keys.job(job_id), mapping={"name": "work", "args": "[]", "enqueued_at": 1}
                )
                pipe.lpush(keys.queue("work"), job_id)
                pipe.sadd(keys.names, "work")
                pipe.sadd(keys.ready, "work")
                pipe.lpush(keys.wake("work"), "1")
                pipe.ltrim(keys.wake("work"), 0, 9)
                pipe.execute()
            await wait_until(lambda job_id=job_id: job_id in ran, within=20)  # type: ignore[misc]
        wakes = pool.current_run.wakes if pool.current_run is not None else None
        assert isinstance(wakes, NodeWakes) and bool(wakes.looks) is not refused


@pytest.mark.timeout(60)
async def test_a_rate_set_rings_the_wake_channel(cluster: ClusterGroup) -> None:
    """``set_rate`` on one shard pushes a wake token so that waiting pools take the new
    rate at once: into an empty list it rings the list's shard channel too, as the
    scripts' pushes do (a pool in a cluster waits on the channel, not the list)."""
    ns = "nw" + os.urandom(4).hex()
    keys = Keys(ns)
    channel = keys.wake("work")
    with cluster.owner(key_slot(channel.encode())).client(socket_timeout=5) as r:
        pubsub = r.pubsub()
        pubsub.ssubscribe(channel)
        async with Client.from_url(cluster.url, ns) as client:
            await client.admin.set_rate("work", "10/s")

        def rung() -> bool:
            for _ in range(50):
                message = pubsub.get_sharded_message(timeout=0.2)
                if message is not None and message["type"] == "smessage":
                    return True
            return False

        assert await anyio.to_thread.run_sync(rung)
        pubsub.close()


@pytest.mark.timeout(120)
async def test_a_pool_refused_the_wake_channels_waits_on_each_shard(
    cluster: ClusterGroup,
) -> None:
    """A pool whose ACL lacks SSUBSCRIBE (as Redis 6.2 lacks the command) waits as
    before, a BLPOP per shard, and is woken at once."""
    ns = "nw" + os.urandom(4).hex()
    shards = 3
    user, password = "w" + os.urandom(3).hex(), os.urandom(8).hex()
    rules = ["~*", "&*", "+@all", "-ssubscribe"]
    for server in cluster.servers:
        with server.client(socket_timeout=5) as r:
            r.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    url = cluster.url.replace("://", f"://{user}:{password}@")
    ran: set[str] = set()
    pool = WorkerPool(settings=pool_settings(url, ns, shards=shards, wake_timeout=SAFETY_NET))

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.add(ctx.id)

    async with pool.running(), Client.from_url(cluster.url, ns, shards=shards) as client:
        # A fetcher's BLPOP and a scheduler's per shard, and no subscription.
        waits = {(2 * shards, 0)}
        await wait_until(
            lambda: {tuple(map(sum, zip(*_waits(cluster).values(), strict=True)))} == waits,
            within=20,
        )
        await _run_all(client, ran, _one_per_shard(shards, "apart"))
