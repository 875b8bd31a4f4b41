"""The pool that holds the rebalancer's lease killed with SIGKILL while jobs of a limited
name run over two shards in two pools, the work moving from one shard to the other:
the name's limit is never exceeded (counted from the ledger, each attempt from its
start line to its done line or to the kill of its process), another pool takes the
lease, and every job completes.
"""

from __future__ import annotations

import random
import time

import pytest

from rota import Client
from tests.chaos.app import CAPPED
from tests.chaos.harness import Audit, Chaos, pick, report
from tests.chaos.reshard import ids_in, up
from tests.helpers import wait_until

pytestmark = pytest.mark.chaos

#: Jobs of each wave, each wave routed to one shard (0, 1, 0 and so on).
WAVE = pick(300, 1000)
#: Holders killed, one after the other, each replaced by a new pool.
KILLS = pick(3, 10)
#: ``keep_none``: the records of ``capped`` jobs (which return None) are read at the end.
SETTINGS = {"shards": 2, "lease": 2, "heartbeat_interval": 0.5, "concurrency": 20, "keep_none": 600}


def _holder(chaos: Chaos) -> str | None:
    """The pool id that holds the rebalancer's lease (None: none)."""
    raw = chaos.r.get(f"{{{chaos.namespace}}}:rebalancer")
    return None if raw is None else str(raw.decode().rpartition(" ")[0])  # type: ignore[union-attr]


@pytest.mark.timeout(pick(180, 600))
async def test_the_rebalancer_killed_under_load_never_exceeds_the_limit(chaos: Chaos) -> None:
    url, namespace, fleet, ledger = chaos.url, chaos.namespace, chaos.fleet, chaos.ledger
    rng = random.Random(11)
    for _ in range(2):
        fleet.start(url, namespace, **SETTINGS)
    await wait_until(lambda: up(chaos.r, namespace) == 2, within=30)
    sent: list[str] = []
    killed: dict[int, float] = {}
    taken: list[float] = []
    async with Client.from_url(url, namespace, shards=2) as op:
        tags = [s.keys.prefix[1:-2] for s in op.admin.shards]

        async def wave(n: int) -> None:
            for job_id in ids_in(namespace, tags[n % 2], 2, WAVE, f"w{n}."):
                await op.enqueue("capped", ms=rng.uniform(20, 120), job_id=job_id)
                sent.append(job_id)

        await wave(0)
        for n in range(1, KILLS + 1):
            done = len(ledger.by_job("done"))
            await wait_until(lambda: len(ledger.by_job("done")) >= done + WAVE // 3, within=60)  # noqa: B023
            await wait_until(lambda: _holder(chaos) is not None, within=30)
            await wave(n)  # the work moves to the other shard: the parts follow it
            holder = _holder(chaos)
            victim = next(w for w in fleet.alive if f":{w.pid}:" in f"{holder}")
            killed[victim.pid] = victim.kill9()
            await wait_until(lambda: _holder(chaos) not in (None, holder), within=30)  # noqa: B023
            taken.append(time.time() - killed[victim.pid])
            assert any(f":{w.pid}:" in f"{_holder(chaos)}" for w in fleet.alive)
            fleet.start(url, namespace, **SETTINGS)  # as a supervisor would
        everything = set(sent)
        await wait_until(lambda: set(ledger.by_job("done")) >= everything, within=pick(120, 400))
        states = {(await op.job(j)).state for j in sent}  # type: ignore[union-attr]
        parts = [int(chaos.r.hget(f"{{{t}}}:limits", "capped") or 0) for t in tags]
    audit = Audit(sent, {}, ledger.by_job("start"), ledger.by_job("done"))
    most = audit.most_running(dict.fromkeys(sent, "capped"), killed)["capped"]
    report(
        "rebalance_kill9",
        {
            "jobs": len(sent),
            "limit": CAPPED,
            "most_running": most,
            "kills": KILLS,
            "lease_taken_s": [round(t, 2) for t in taken],
            "parts_after": parts,
        },
    )
    assert states == {"complete"}
    assert most <= CAPPED, fleet.tails()
    assert sum(parts) <= CAPPED
