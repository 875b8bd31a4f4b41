"""``python -m bench.scale_model`` (docs/performance.md, "The scale model") on a small
run: each primary's counts are its own, the reads' commands taken off, and the shards
land where the model says. Nothing here is about the figures themselves."""

from __future__ import annotations

import pytest
from bench.scale_model import Primaries, fit_line, floor, measure

from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology


@pytest.mark.timeout(180)
def test_scale_model_counts_what_each_primary_does() -> None:
    with ClusterGroup(replicas=0) as cluster:
        nodes = Primaries(cluster)
        try:
            alone = floor(nodes, 0.5)
            one, three = measure(nodes, [1, 3], jobs=300, reps=1, settle=0.5, idle=1.0)
        finally:
            nodes.close()
    # No pool, no command: the reads' own INFO (and no HELLO) is not counted.
    assert [(n.commands, n.reads, n.connections) for n in alone] == [(0, 0, 0)] * 3
    assert sorted(one.shards_per_node) == [0, 0, 1]
    assert three.shards_per_node == [1, 1, 1]
    holder = one.shards_per_node.index(1)
    assert one.enqueue[holder].commands >= 300 // 50  # an enqueue_batch call per 50 jobs
    assert one.run[holder].commands >= 300  # every job runs at least one command
    assert all(n.commands > 0 for n in three.run)
    assert one.jobs_per_s > 0 and one.idle_s >= 1.0


def test_fit_line_finds_the_fixed_part_and_the_part_per_shard() -> None:
    a, b = fit_line([1, 3, 6, 12], [1 + 5 * k for k in (1, 3, 6, 12)])
    assert a == pytest.approx(1) and b == pytest.approx(5)
    assert fit_line([4, 4], [2, 6]) == (4.0, 0.0)  # one K: no slope to find
