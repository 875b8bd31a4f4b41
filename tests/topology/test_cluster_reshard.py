"""A change of the shard count on a three-primary cluster, a pool and a producer
running: the new shards' connections go to the nodes of their slots, and every job runs
once (see tests/test_reshard.py for the same on one server)."""

from __future__ import annotations

import os

import pytest

from rota import Client
from rota.client.admin_servers import shard_place
from rota.client.resize import resize
from tests.test_reshard import change_under_load
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology


async def test_one_to_three_to_one_on_a_cluster(cluster_group: ClusterGroup) -> None:
    ns = "rs" + os.urandom(4).hex()
    await change_under_load(cluster_group.url, ns, [3, 1], start=1)


async def test_each_new_shard_is_reached_on_the_node_of_its_slot(
    cluster_group: ClusterGroup,
) -> None:
    ns = "rs" + os.urandom(4).hex()
    async with Client.from_url(cluster_group.url, ns) as op:
        done = await resize(op, 3)
        assert done.done
        # One write per shard: each lands on the node that owns its slot (a wrong node
        # would answer MOVED).
        for shard in op.admin.shards:
            await shard.redis.set(shard.keys.quarantine("probe"), "1")
        servers = {shard_place(shard)[2] for shard in op.admin.shards}
        assert len(servers) == 3, servers
        jobs = [await op.enqueue("n", i=i) for i in range(30)]
        assert all([await op.job(j.id) is not None for j in jobs])
