"""``python -m bench.many_nodes`` (docs/performance.md, "The scale model") and the cluster
it builds: a count of primaries other than three is made as asked, every shard lands
where the model says, and the idle pool's connections are counted on each node.
Nothing here is about the figures themselves."""

from __future__ import annotations

import pytest
from bench.many_nodes import run_k
from bench.scale_model import Primaries

from tests.topology_servers import ClusterGroup


def test_a_cluster_of_fewer_than_three_primaries_is_refused_before_any_server() -> None:
    with pytest.raises(ValueError, match="3 primaries or more"):
        ClusterGroup(replicas=0, primaries=2)


@pytest.mark.slow
@pytest.mark.topology
@pytest.mark.timeout(180)
def test_many_nodes_counts_each_of_six_primaries() -> None:
    with ClusterGroup(replicas=0, primaries=6) as cluster:
        nodes = Primaries(cluster)
        try:
            assert len(nodes.servers) == 6
            run = run_k(nodes, 6, jobs=300, settle=0.5, idle=1.0)
        finally:
            nodes.close()
    assert run.shards_per_node == [1] * 6  # one shard a node: the model's K = N
    assert all(n.commands > 0 for n in run.run)  # every node ran some of the jobs
    assert sum(n.connections for n in run.start) >= 6  # the pool connected to each
    # Idle, the pool holds its wait and its heartbeat's connections on every node.
    assert all(c.count >= 1 for c in run.clients)
    assert run.seconds["idle"] >= 1.0 and run.jobs_per_s > 0
