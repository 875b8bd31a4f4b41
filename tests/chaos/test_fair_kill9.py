"""Fair keys under SIGKILL: worker processes killed every two seconds while the jobs of
six keys, each held to two running at once, run: no job is lost, and no key ever has
more than two jobs running, counted from the ledger (each attempt from its start to its
done line, or to the SIGKILL of its process when it has none).

``CHAOS_LENGTH=full`` runs 3,000 jobs."""

from __future__ import annotations

import random
import time

import anyio
import pytest

from rota import Client, JobSpec
from tests.chaos.harness import (
    SHARDS,
    Audit,
    Chaos,
    durations,
    enqueue,
    leftovers,
    pick,
    processed,
    stats,
)

pytestmark = pytest.mark.chaos

JOBS = pick(600, 3000)
KEYS = [f"tenant-{i}" for i in range(6)]
KEY_LIMIT = 2
PROCESSES = 3
KILL_EVERY = 2.0
LEASE = 2.0


def _set_limit(url: str, namespace: str) -> None:
    async def run() -> None:
        async with Client.from_url(url, namespace, shards=SHARDS) as client:
            await client.admin.fair.set_key_limit("work", None, KEY_LIMIT)

    anyio.run(run)


@pytest.mark.timeout(pick(240, 900))
def test_sigkill_loses_no_keyed_job_and_no_key_passes_its_limit(chaos: Chaos) -> None:
    url, r, namespace, fleet, ledger = chaos
    _set_limit(url, namespace)
    rng = random.Random(3)
    key_of: dict[str, str] = {}
    specs = [
        JobSpec(name="work", kwargs={"ms": ms}, fair_key=rng.choice(KEYS))
        for ms in durations(JOBS, 20, 60)
    ]
    ids = enqueue(url, namespace, specs)
    key_of = {job_id: spec.fair_key or "" for job_id, spec in zip(ids, specs, strict=True)}
    settings = {"concurrency": 10, "lease": LEASE, "heartbeat_interval": 0.5, "max_lost": 10}
    for _ in range(PROCESSES):
        fleet.start(url, namespace, **settings)
    killed_at: dict[int, float] = {}
    started = time.monotonic()
    deadline = started + pick(180, 800)
    next_kill = started + KILL_EVERY
    while processed(r, namespace) < JOBS:
        now = time.monotonic()
        assert now < deadline, f"{processed(r, namespace)} of {JOBS} done\n{fleet.tails()}"
        if now >= next_kill:
            alive = fleet.alive
            ripe = [w for w in alive if time.time() - w.started > 1.0] or alive[:1]
            victim = rng.choice(ripe)
            killed_at[victim.pid] = victim.kill9()
            fleet.start(url, namespace, **settings)
            next_kill += KILL_EVERY
        time.sleep(0.02)
    fleet.close()

    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], [audit.describe(j) for j in audit.lost[:5]]
    assert stats(r, namespace)["processed"] == JOBS
    assert set(leftovers(r, namespace, ["work"]).values()) == {0}
    most = audit.most_running(key_of, killed_at)
    assert max(most.values()) <= KEY_LIMIT, most
    assert max(most.values()) == KEY_LIMIT  # reached: the check above means something
