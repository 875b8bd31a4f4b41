"""One namespace over six shards on a three-primary cluster: the shards spread two to a
primary, every job runs once, and each primary carries its share of the Redis work."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
from redis.crc import key_slot

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.shards import shard_tags
from tests.chaos.harness import report
from tests.helpers import pool_settings, wait_until
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 6
JOBS = 6000 if os.environ.get("ROTA_LONG") == "1" else 1200


def _commands(cluster: ClusterGroup) -> dict[int, tuple[int, int]]:
    """Commands each primary has run so far, and the µs they took (commandstats)."""
    out = {}
    for server in cluster.servers:
        with server.client(socket_timeout=5) as r:
            if r.info("replication").get("role") != "master":
                continue
            stats = r.info("commandstats")
        out[server.port] = (
            sum(int(v["calls"]) for v in stats.values()),
            sum(int(v["usec"]) for v in stats.values()),
        )
    return out


async def _run(cluster: ClusterGroup, shards: int) -> dict[int, tuple[int, int]]:
    """Run JOBS no-op jobs in a new namespace of ``shards``; what each primary did."""
    ns = "sh" + os.urandom(4).hex()
    ran: Counter[int] = Counter()
    pool = WorkerPool(settings=pool_settings(cluster.url, ns, shards=shards, concurrency=40))

    @pool.job
    async def work(ctx: JobContext, i: int) -> None:
        ran[i] += 1

    before = _commands(cluster)
    async with Client.from_url(cluster.url, ns, shards=shards) as client:
        specs = [JobSpec(name="work", kwargs={"i": i}) for i in range(JOBS)]
        for i in range(0, JOBS, 500):
            await client.enqueue_many(specs[i : i + 500])
        async with pool.running():
            await wait_until(lambda: len(ran) == JOBS, within=90)
        assert set(ran.values()) == {1}  # none lost, none run twice
        assert (await client.stats())["processed"] == JOBS
        queue = (await client.queues(["work"]))[0]
        assert (queue.size, queue.running) == (0, 0)
        # Each part talked to the primary that owns its shard's slot.
        for part in client.parts:
            owner = cluster.owner(key_slot(part.keys.prefix.encode()))
            assert part.link is not None and part.link.port == owner.port
    after = _commands(cluster)
    return {
        port: (after[port][0] - before[port][0], after[port][1] - before[port][1]) for port in after
    }


@pytest.mark.timeout(120)
async def test_six_shards_spread_over_three_primaries_and_share_the_work(
    cluster_group: ClusterGroup,
) -> None:
    ns = "sh" + os.urandom(4).hex()
    owners = Counter(cluster_group.owner(key_slot(t.encode())).port for t in shard_tags(ns, K))
    assert sorted(owners.values()) == [2, 2, 2], owners  # two shards on each primary

    one = await _run(cluster_group, 1)
    done = await _run(cluster_group, K)
    total = sum(n for n, _ in done.values())
    shares: dict[int, Any] = {port: round(n / total, 3) for port, (n, _) in done.items()}
    report(
        "cluster_shards",
        {
            "jobs": JOBS,
            "commands_per_job_k1": round(sum(n for n, _ in one.values()) / JOBS, 2),
            f"commands_per_job_k{K}": round(total / JOBS, 2),
            "redis_us_per_job_k1": round(sum(u for _, u in one.values()) / JOBS, 1),
            f"redis_us_per_job_k{K}": round(sum(u for _, u in done.values()) / JOBS, 1),
            "share_per_primary": sorted(shares.values()),
        },
    )
    # About a third each (the same jobs spread by their ids; an idle shard still waits
    # on its wake lists): no primary carries the namespace alone.
    assert all(0.2 < share < 0.47 for share in shares.values()), shares
