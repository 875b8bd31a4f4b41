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
from rota.client.shard import Shard
from rota.protocol.reshard import RESHARD_MESSAGE
from tests.chaos.app import CAPPED
from tests.chaos.harness import Audit, Chaos, Worker, pick, report
from tests.chaos.reshard import ids_in, ran_once_or_after_a_kill, retiring, say, tag_keys, up
from tests.helpers import wait_until

pytestmark = pytest.mark.chaos

JOBS = pick(6, 20)
#: Milliseconds the held jobs' first attempt runs (it is killed before), and the next.
RUN_MS, AGAIN_MS = 120_000, 1000
#: Jobs of the limited name the killed pool holds in the retired shard, and those sent
#: to the new shards after the end.
CAPPED_HELD, MORE = 8, pick(120, 400)
#: ``keep_none``: the records of ``capped`` jobs (which return None) are read at the end.
SETTINGS = {"shards": 2, "lease": 2, "heartbeat_interval": 0.5, "concurrency": 40, "keep_none": 600}


async def _held_by_the_first(
    chaos: Chaos, prefix: str, name: str = "work", n: int = JOBS
) -> tuple[str, str, list[str], Worker]:
    """The namespace (at 2 shards), the tag 4 retires, ``n`` jobs of ``name`` routed
    there, all of them running in the first of two pools (the second started after
    they did)."""
    namespace, tag = retiring(chaos.namespace, 2, 4)
    async with Client.from_url(chaos.url, namespace) as op:
        await resize(op, 2, say=say)
        first = chaos.fleet.start(chaos.url, namespace, **SETTINGS)
        await wait_until(lambda: up(chaos.r, namespace) == 1, within=30)
        ids = ids_in(namespace, tag, 2, n, prefix)
        for job_id in ids:
            await op.enqueue(name, ms=RUN_MS, again_ms=AGAIN_MS, job_id=job_id)
        await wait_until(lambda: len(chaos.ledger.by_job("start")) == n, within=30)
    chaos.fleet.start(chaos.url, namespace, **SETTINGS)
    await wait_until(lambda: up(chaos.r, namespace) == 2, within=30)
    return namespace, tag, ids, first


async def _ended_while_held(op: Client, tag: str, n: int) -> tuple[list[Shard], list[Shard]]:
    """2 -> 4 started, its end written as the command writes it while the ``n`` jobs
    of ``tag`` still run (leased after the command's last look): the shards of the
    change, and those it retired."""
    started = await resize(op, 4, wait=False, say=say)
    assert not started.done and started.live == {tag: n}
    union = list(op.admin.shards)
    final = op.admin.follower.route.record.ended()
    for shard in (*union[1:], union[0]):
        await shard.redis.set(shard.keys.shards, final.text())
    await union[0].redis.publish(union[0].keys.pool_commands_told, RESHARD_MESSAGE)
    await op.admin.follower.reread()
    return union, [s for s in union if s not in op.admin.shards]


async def _settled(op: Client, chaos: Chaos, union: list[Shard], retired: list[Shard]) -> None:
    """The command's last step: the pools leave the retired shards, nothing left there."""
    named = op.admin.follower.route.named
    lingering, live, _ = await settle_retired(retired, named, union[0], timeout=120, say=say)
    assert (lingering, live) == ({}, {}), chaos.fleet.tails()


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
        union, retired = await _ended_while_held(op, tag, JOBS)
        first.kill9()
        await _settled(op, chaos, union, retired)
        lost, again = await ran_once_or_after_a_kill(op, chaos.ledger, ids, {first.pid})
    assert lost == [], chaos.fleet.tails()
    assert tag_keys(chaos.r, tag) == set()
    report("reshard_kill9_end", {"jobs": JOBS, "lost": len(lost), "run_again": again})


@pytest.mark.timeout(pick(120, 300))
async def test_a_limit_holds_while_a_retired_shard_still_runs_its_jobs(chaos: Chaos) -> None:
    """The same end, the jobs of a limited name (``capped``, 12 over every shard): those
    the killed pool held run again in the retired shard while jobs of the name wait in
    the new shards, and never more than 12 run at once (the retired shard's running
    jobs count against the whole until it is left)."""
    namespace, tag, held, first = await _held_by_the_first(chaos, "held", "capped", CAPPED_HELD)
    async with Client.from_url(chaos.url, namespace) as op:
        union, retired = await _ended_while_held(op, tag, CAPPED_HELD)
        killed = {first.pid: first.kill9()}
        rest = [(await op.enqueue("capped", ms=200)).id for _ in range(MORE)]
        await _settled(op, chaos, union, retired)
        ids = held + rest
        await wait_until(lambda: set(chaos.ledger.by_job("done")) >= set(ids), within=60)
        lost, again = await ran_once_or_after_a_kill(op, chaos.ledger, ids, set(killed))
    audit = Audit(ids, {}, chaos.ledger.by_job("start"), chaos.ledger.by_job("done"))
    most = audit.most_running(dict.fromkeys(ids, "capped"), killed)["capped"]
    report(
        "reshard_kill9_limit",
        {"jobs": len(ids), "most_running": most, "limit": CAPPED, "run_again": again},
    )
    assert lost == [], chaos.fleet.tails()
    assert most <= CAPPED
