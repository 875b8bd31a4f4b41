"""Locating a client's shards on a cluster costs one ``CLUSTER SLOTS``, not one per shard
and node: the shards share the cluster's slot map (:mod:`rota.redis.slotmap`).

Twelve shards of one namespace on three primaries, connected as a client connects them
(one pool per shard's tag, same seed nodes). Counted on the primaries themselves
(``INFO commandstats``):

1. the twelve shards located at once cost one ``CLUSTER SLOTS`` in all (each shard
   asking each node cost 36);
2. after one shard's slot moved to another primary and every shard connects again, the
   moved shard follows its ``MOVED`` (which places its slot in the map) or the map asked
   again, with one ``CLUSTER SLOTS`` in all at most (one per node before), and reaches
   the new owner.
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis.asyncio import Redis
from redis.crc import key_slot

from rota.protocol.shards import shard_tags
from rota.redis.access import connect
from rota.redis.topology import SlotOwnerPool
from tests.topology.test_cluster import migrate_slot
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 12


def _slot(tag: str) -> int:
    return key_slot(("{" + tag + "}:").encode())


def _reset(cluster: ClusterGroup) -> None:
    for server in cluster.servers:
        with server.client(socket_timeout=5) as r:
            r.config_resetstat()


def _slots_asked(cluster: ClusterGroup) -> dict[int, int]:
    """``CLUSTER SLOTS`` each node ran since its stats were reset."""
    out = {}
    for server in cluster.servers:
        with server.client(socket_timeout=5) as r:
            stats = r.info("commandstats")
        out[server.port] = int(stats.get("cmdstat_cluster|slots", {}).get("calls", 0))
    return out


async def _get(client: Redis, key: str) -> bytes | str | None:
    """GET ``key``, again once after a ``MOVED`` (a client tries once; rota's callers
    wait out and retry, :mod:`rota.redis.outage`)."""
    try:
        return await client.get(key)
    except redis.exceptions.ConnectionError:
        return await client.get(key)


def _pool(client: Redis) -> SlotOwnerPool:
    pool = client.connection_pool
    assert isinstance(pool, SlotOwnerPool)
    return pool


def test_shards_located_at_once_ask_once_and_follow_a_moved_slot_with_one_ask() -> None:
    with ClusterGroup(replicas=0) as cluster:
        tags = shard_tags("sm", K)
        _reset(cluster)

        async def first() -> list[tuple[str, int]]:
            clients = [connect(cluster.url, namespace=tag) for tag in tags]
            try:
                return await asyncio.gather(*(_pool(c).locate() for c in clients))
            finally:
                for c in clients:
                    await c.aclose()

        owners = asyncio.run(first())
        asked = _slots_asked(cluster)  # before cluster.owner, which asks too
        assert sum(asked.values()) == 1, asked  # not one per shard and node (36)
        assert [port for _, port in owners] == [cluster.owner(_slot(t)).port for t in tags]

        moving = tags[0]
        source = cluster.owner(_slot(moving))
        target = next(s for s in cluster.servers if s.port != source.port)

        async def moved() -> None:
            clients = [connect(cluster.url, namespace=tag) for tag in tags]
            try:
                await asyncio.gather(
                    *(c.set("{" + t + "}:k", t) for c, t in zip(clients, tags, strict=True))
                )
                await asyncio.to_thread(migrate_slot, cluster, _slot(moving), target)
                await asyncio.to_thread(_reset, cluster)
                for c in clients:  # every shard connects again, as after a reconnect
                    await c.connection_pool.disconnect()
                got = await asyncio.gather(
                    *(_get(c, "{" + t + "}:k") for c, t in zip(clients, tags, strict=True))
                )
                assert got == [t.encode() for t in tags]
                assert _pool(clients[0]).owner == ("127.0.0.1", target.port)
            finally:
                for c in clients:
                    await c.aclose()

        asyncio.run(moved())
        asked = _slots_asked(cluster)
        assert sum(asked.values()) <= 1, asked  # not one per node for the moved shard
