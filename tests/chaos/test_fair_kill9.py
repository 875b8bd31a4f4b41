"""Fair keys under SIGKILL: worker processes killed every two seconds while the jobs of
six keys, each held to two running at once, run: no job is lost, and no key ever has
more than two jobs running, counted from the ledger (each attempt from its start to its
done line, or to the SIGKILL of its process when it has none). The jobs last 100-300 ms,
so that the run outlasts a few kills (about 10 s of work at 12 at once).

``CHAOS_LENGTH=full`` runs 3,000 jobs."""

from __future__ import annotations

import random
import time

import pytest

from rota import JobSpec
from tests.chaos.disrupt import replace_one, set_key_limit
from tests.chaos.harness import (
    Audit,
    Chaos,
    durations,
    enqueue,
    leftovers,
    pick,
    processed,
    report,
    stats,
)

pytestmark = pytest.mark.chaos

JOBS = pick(600, 3000)
KEYS = [f"tenant-{i}" for i in range(6)]
KEY_LIMIT = 2
PROCESSES = 3
KILL_EVERY = 2.0
LEASE = 2.0


@pytest.mark.timeout(pick(240, 900))
def test_sigkill_loses_no_keyed_job_and_no_key_passes_its_limit(chaos: Chaos) -> None:
    url, r, namespace, fleet, ledger = chaos
    set_key_limit(url, namespace, "work", KEY_LIMIT)
    rng = random.Random(3)
    key_of: dict[str, str] = {}
    specs = [
        JobSpec(name="work", kwargs={"ms": ms}, fair_key=rng.choice(KEYS))
        # 100-300 ms: at most 12 run at once, so the run outlasts a few kills (jobs of
        # 20-60 ms were all done before the first pool was old enough to be killed)
        for ms in durations(JOBS, 100, 300)
    ]
    ids = enqueue(url, namespace, specs)
    key_of = {job_id: spec.fair_key or "" for job_id, spec in zip(ids, specs, strict=True)}
    settings = {"concurrency": 10, "lease": LEASE, "heartbeat_interval": 0.5, "max_lost": 10}
    for _ in range(PROCESSES):
        fleet.start(url, namespace, **settings)
    started = time.monotonic()
    deadline = started + pick(180, 800)
    next_kill = started + KILL_EVERY
    while processed(r, namespace) < JOBS:
        now = time.monotonic()
        assert now < deadline, f"{processed(r, namespace)} of {JOBS} done\n{fleet.tails()}"
        if now >= next_kill:
            replace_one(fleet, rng, url, namespace, **settings)
            next_kill += KILL_EVERY
        time.sleep(0.02)
    fleet.close()
    killed_at = {w.pid: w.killed_at for w in fleet.workers if w.killed_at is not None}

    assert killed_at, "no pool was killed: the run proved nothing"

    audit = Audit.of(r, namespace, ledger, ids)
    most = audit.most_running(key_of, killed_at)
    figures = {"jobs": JOBS, "kills": len(killed_at), "lost": len(audit.lost)}
    report("fair_kill9", {**figures, "runs again": audit.duplicate_runs, "most": most})
    assert audit.lost == [], [audit.describe(j) for j in audit.lost[:5]]
    assert stats(r, namespace)["processed"] == JOBS
    assert set(leftovers(r, namespace, ["work"]).values()) == {0}
    assert max(most.values()) <= KEY_LIMIT, most
    assert max(most.values()) == KEY_LIMIT  # reached: the check above means something
