"""A pool killed with SIGKILL right after it leased a job in a shard where the other
pools were idle: the job is still reclaimed.

The other pool (in this process) no longer beats, reaps or ticks in a shard but 0 while
one look a heartbeat finds neither a lease nor a scored pool there (rota.worker.idle):
it is quiet in the job's shard before the job comes. The worker process that leases the
job there is killed as soon as its ledger says the job started, before or just after its
first beat there; nothing of it is left but the lease and the leased set its fetch
wrote. The live pool's next look finds them, its heartbeat and reaper work in that shard
again, and the lease is reclaimed (reason lost) once it expires and the shard is calm.
"""

from __future__ import annotations

from typing import cast

import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.keys import Keys
from rota.protocol.shards import new_id_in
from tests.chaos.harness import Chaos
from tests.helpers import pool_settings, quiet_in, wait_until

pytestmark = pytest.mark.chaos

K = 4
SHARD = 3  # the job's shard: not shard 0, where every pool beats
INTERVAL = 0.5
LEASE = 2.0


async def _other(ctx: JobContext) -> None:
    return None


def _record(r: redis.Redis, keys: Keys, job_id: str) -> dict[str, str]:
    raw = cast(dict[bytes, bytes], r.hgetall(keys.job(job_id)))
    return {k.decode(): v.decode() for k, v in raw.items()}


@pytest.mark.timeout(120)
async def test_a_job_leased_in_an_idle_shard_by_a_pool_killed_at_once_is_reclaimed(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    settings = {"shards": K, "heartbeat_interval": INTERVAL, "lease": LEASE}
    live = WorkerPool(settings=pool_settings(url, namespace, **settings))
    live.job(name="other")(_other)  # not the job's name: it stays queued once reclaimed
    job_id = new_id_in(SHARD, K)
    keys = Keys(namespace, SHARD, K)
    async with Client.from_url(url, namespace, shards=K) as client, live.running():
        await quiet_in(live, SHARD)

        worker = fleet.start(url, namespace, **settings)
        await client.enqueue_many([JobSpec(name="work", args=(600_000,), job_id=job_id)])
        await wait_until(lambda: job_id in ledger.by_job("start"), within=60)
        worker.kill9()
        holder = _record(r, keys, job_id)
        assert holder["state"] == "running", holder

        await wait_until(lambda: r.hget(keys.job(job_id), "lost") == b"1", within=60)
        record = _record(r, keys, job_id)
    assert (record["state"], record["reason"]) == ("queued", "lost"), record
    assert r.lrange(keys.queue("work"), 0, -1) == [job_id.encode()]
    assert ledger.by_job("start")[job_id][0].attempt == 1
