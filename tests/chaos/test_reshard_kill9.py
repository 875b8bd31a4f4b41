"""A pool killed with SIGKILL while it runs jobs of a shard that a change of the shard
count (2 -> 4) retires: the jobs are not lost, the other pool reaps and runs them, and
the change completes.

Two moments: in the middle of the change (the command drains the old shard: the other
pool, which serves the union, reaps the leases there), and after its end (the jobs were
leased after the command's last look, and the end is written by hand as it then is:
the other pool must serve the retired shard until it holds no job, or they stay there
with their leases, reaped by no one).
"""

from __future__ import annotations

import pytest

from rota import Client
from rota.client.resize import resize, settle_retired
from rota.protocol.reshard import RESHARD_MESSAGE
from tests.chaos.harness import Chaos, Worker, pick, report
from tests.chaos.reshard import ids_in, ran_once_or_after_a_kill, retiring, say, tag_keys, up
from tests.helpers import wait_until

pytestmark = pytest.mark.chaos

JOBS = pick(6, 20)
#: Milliseconds each job runs: long enough to be running still at the kill.
RUN_MS = 8000
SETTINGS = {"shards": 2, "lease": 2, "heartbeat_interval": 0.5, "concurrency": 40}


async def _held_by_the_first(chaos: Chaos, prefix: str) -> tuple[str, str, list[str], Worker]:
    """The namespace (at 2 shards), the tag 4 retires, jobs routed there, all of them
    running in the first of two pools (the second started after they did)."""
    namespace, tag = retiring(chaos.namespace, 2, 4)
    async with Client.from_url(chaos.url, namespace) as op:
        await resize(op, 2, say=say)
        first = chaos.fleet.start(chaos.url, namespace, **SETTINGS)
        await wait_until(lambda: up(chaos.r, namespace) == 1, within=30)
        ids = ids_in(namespace, tag, 2, JOBS, prefix)
        for job_id in ids:
            await op.enqueue("work", ms=RUN_MS, job_id=job_id)
        await wait_until(lambda: len(chaos.ledger.by_job("start")) == JOBS, within=30)
    chaos.fleet.start(chaos.url, namespace, **SETTINGS)
    await wait_until(lambda: up(chaos.r, namespace) == 2, within=30)
    return namespace, tag, ids, first


@pytest.mark.timeout(pick(120, 300))
async def test_a_pool_killed_in_the_middle_of_a_change_loses_no_job(chaos: Chaos) -> None:
    namespace, tag, ids, first = await _held_by_the_first(chaos, "mid")
    async with Client.from_url(chaos.url, namespace) as op:
        started = await resize(op, 4, wait=False, say=say)
        assert not started.done and started.live == {tag: JOBS}
        first.kill9()
        done = await resize(op, 4, timeout=120, say=say)
        assert done.done and done.live == {} and done.lingering == {}
        lost, again = await ran_once_or_after_a_kill(op, chaos.ledger, ids, {first.pid})
    assert lost == [], chaos.fleet.tails()
    assert tag_keys(chaos.r, tag) == set()
    report("reshard_kill9_mid", {"jobs": JOBS, "lost": len(lost), "run_again": again})


@pytest.mark.timeout(pick(120, 300))
async def test_a_pool_killed_holding_jobs_of_a_retired_shard_loses_none(chaos: Chaos) -> None:
    namespace, tag, ids, first = await _held_by_the_first(chaos, "end")
    async with Client.from_url(chaos.url, namespace) as op:
        started = await resize(op, 4, wait=False, say=say)
        assert not started.done
        # The end as the command writes it, while the first pool still runs the jobs.
        union = list(op.admin.shards)
        final = op.admin.follower.route.record.ended()
        for shard in (*union[1:], union[0]):
            await shard.redis.set(shard.keys.shards, final.text())
        await union[0].redis.publish(union[0].keys.pool_commands_told, RESHARD_MESSAGE)
        await op.admin.follower.reread()
        first.kill9()
        retired = [s for s in union if s not in op.admin.shards]
        lingering, live, _ = await settle_retired(
            retired, op.admin.follower.route.named, union[0], timeout=120, say=say
        )
        assert (lingering, live) == ({}, {}), chaos.fleet.tails()
        lost, again = await ran_once_or_after_a_kill(op, chaos.ledger, ids, {first.pid})
    assert lost == [], chaos.fleet.tails()
    assert tag_keys(chaos.r, tag) == set()
    report("reshard_kill9_end", {"jobs": JOBS, "lost": len(lost), "run_again": again})
