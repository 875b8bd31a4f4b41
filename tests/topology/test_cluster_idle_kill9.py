"""A pool killed with SIGKILL right after it leased a job in a shard of a cluster where
the other pool was idle: the job is still reclaimed (as tests/chaos/
test_idle_shard_kill9.py on one server). The live pool beats in that shard only while
its node's look (rota.worker.idle) finds a lease or a scored pool there: the lease left
by the dead pool makes it beat and reap there again."""

from __future__ import annotations

from typing import cast

import pytest
from redis.crc import key_slot

from rota import Client, JobSpec, WorkerPool
from rota.protocol.keys import Keys
from rota.protocol.shards import new_id_in
from tests.chaos.harness import Fleet, Ledger
from tests.chaos.test_idle_shard_kill9 import INTERVAL, LEASE, _other
from tests.helpers import pool_settings, quiet_in, wait_until
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

K = 6
SHARD = 4  # the job's shard: not shard 0, where every pool beats


@pytest.mark.timeout(120)
async def test_a_job_leased_in_an_idle_shard_of_a_cluster_by_a_pool_killed_is_reclaimed(
    cluster: ClusterGroup, fleet: Fleet, ledger: Ledger
) -> None:
    namespace = "ckill"
    settings = {"shards": K, "heartbeat_interval": INTERVAL, "lease": LEASE}
    live = WorkerPool(settings=pool_settings(cluster.url, namespace, **settings))
    live.job(name="other")(_other)  # not the job's name: it stays queued once reclaimed
    job_id = new_id_in(SHARD, K)
    keys = Keys(namespace, SHARD, K)
    node = cluster.owner(key_slot(keys.prefix.encode()))

    def record() -> dict[str, str]:
        with node.client(socket_timeout=5) as r:
            raw = cast(dict[bytes, bytes], r.hgetall(keys.job(job_id)))
        return {k.decode(): v.decode() for k, v in raw.items()}

    async with Client.from_url(cluster.url, namespace, shards=K) as client, live.running():
        await quiet_in(live, SHARD)

        worker = fleet.start(cluster.url, namespace, **settings)
        await client.enqueue_many([JobSpec(name="work", args=(600_000,), job_id=job_id)])
        await wait_until(lambda: job_id in ledger.by_job("start"), within=60)
        worker.kill9()
        assert record()["state"] == "running"

        await wait_until(lambda: record().get("lost") == "1", within=60)
        done = record()
        with node.client(socket_timeout=5) as r:
            queued = r.lrange(keys.queue("work"), 0, -1)
    assert (done["state"], done["reason"]) == ("queued", "lost"), done
    assert queued == [job_id.encode()]
    assert ledger.by_job("start")[job_id][0].attempt == 1
