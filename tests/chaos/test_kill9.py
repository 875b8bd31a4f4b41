"""Worker processes killed with SIGKILL every two seconds: no job is lost.

Three worker processes run N short jobs; every 2 s one of them is killed with SIGKILL
and a new one started, until every job is done. A job runs again only when the process
running it was killed: every job started more than once was in flight in a killed
process. Those are the jobs it was running (at most ``concurrency`` per kill) and the
jobs whose handler had returned but whose finish was not yet sent (finishes are sent
in batches, within a millisecond or so).

``CHAOS_LENGTH=full`` runs 5,000 jobs; ``CHAOS_JOBS=n`` sets any other number.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from tests.chaos.harness import (
    Audit,
    Chaos,
    Worker,
    durations,
    enqueue_work,
    leftovers,
    pick,
    pool_pid,
    processed,
    report,
    stats,
)

pytestmark = pytest.mark.chaos

#: CHAOS_JOBS overrides the number of jobs, for a longer soak than the full form's.
JOBS = int(os.environ.get("CHAOS_JOBS") or pick(1500, 5000))
PROCESSES = 3
CONCURRENCY = 10
KILL_EVERY = 2.0
LEASE = 2.0


@pytest.mark.timeout(pick(240, 900))
def test_sigkill_every_two_seconds_loses_no_job(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    ids = enqueue_work(url, namespace, durations(JOBS, 30, 80))
    # A job in flight at three kills in a row would be taken for a poison pill and made
    # dead (max_lost 3); that guard has its own test, here every job must complete.
    settings = {
        "concurrency": CONCURRENCY,
        "lease": LEASE,
        "heartbeat_interval": 0.5,
        "max_lost": 10,
    }
    for _ in range(PROCESSES):
        fleet.start(url, namespace, **settings)

    rng = random.Random(1)
    kills: list[tuple[Worker, float]] = []
    dead_key = "{" + namespace + "}:dead"
    started = time.monotonic()
    deadline = started + pick(180, 800)
    next_kill = started + KILL_EVERY
    while processed(r, namespace) + r.zcard(dead_key) < JOBS:
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(
                f"only {processed(r, namespace)} of {JOBS} jobs done after {now - started:.0f} s"
                f" with {len(kills)} kills\n{fleet.tails()}"
            )
        if now >= next_kill:
            # a process that has had time to start working, the oldest when none has
            alive = fleet.alive
            ripe = [w for w in alive if time.time() - w.started > 1.0] or alive[:1]
            victim = rng.choice(ripe)
            kills.append((victim, victim.kill9()))
            fleet.start(url, namespace, **settings)
            next_kill += KILL_EVERY
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    survivors = [w for w in fleet.workers if w.killed_at is None]
    assert all(w.alive for w in survivors), f"a worker died by itself\n{fleet.tails()}"
    fleet.close()

    audit = Audit.of(r, namespace, ledger, ids)
    detail = "\n".join(audit.describe(j) for j in audit.lost[:5])
    assert audit.lost == [], f"{len(audit.lost)} jobs lost\n{detail}\n{fleet.tails()}"
    counters = stats(r, namespace)
    assert counters["processed"] == JOBS, counters
    assert set(leftovers(r, namespace, ["work"]).values()) == {0}
    assert all(audit.accepted_result_ok(j) for j in ids)

    # In flight at a kill: started by the killed process, which did not complete it.
    in_flight: dict[int, set[str]] = {}
    for victim, _ in kills:
        in_flight[victim.pid] = {
            j
            for j in ids
            if any(e.pid == victim.pid for e in audit.starts.get(j, []))
            and pool_pid(audit.recs[j]) != victim.pid
        }
    every_in_flight = set().union(*in_flight.values()) if in_flight else set()
    strays = [j for j in audit.jobs_run_twice if j not in every_in_flight]
    assert strays == [], "\n".join(audit.describe(j) for j in strays[:5])
    # Of those, the ones whose handler had returned in the killed process (its done line
    # is there) died with their finish not yet sent: the acker batches finishes, and a
    # worker takes its next job meanwhile. The others were running: at most one per
    # worker, so at most ``concurrency`` per kill.
    unacked = {
        j
        for pid, jobs in in_flight.items()
        for j in jobs
        if any(e.pid == pid for e in audit.dones.get(j, []))
    }
    for pid, jobs in in_flight.items():
        assert len(jobs - unacked) <= CONCURRENCY, (pid, sorted(jobs))
    assert len(every_in_flight - unacked) <= len(kills) * CONCURRENCY

    # Recovery: from the kill until each of its in-flight jobs started elsewhere.
    recoveries = []
    for victim, killed_at in kills:
        for j in in_flight[victim.pid]:
            starts = audit.starts[j]
            last_here = max(e.t for e in starts if e.pid == victim.pid)
            again = min(e.t for e in starts if e.pid != victim.pid and e.t > last_here)
            recoveries.append(again - killed_at)
    max_recovery = max(recoveries, default=0.0)
    assert max_recovery < LEASE + 10, max_recovery

    report(
        "sigkill",
        {
            "jobs": JOBS,
            "processes": PROCESSES,
            "concurrency": CONCURRENCY,
            "lease_s": LEASE,
            "kills": len(kills),
            "lost": len(audit.lost),
            "completed": counters["processed"],
            "duplicate_runs": audit.duplicate_runs,
            "jobs_run_twice": len(audit.jobs_run_twice),
            "most_runs_of_one_job": max(len(v) for v in audit.starts.values()),
            "in_flight_at_kills": len(every_in_flight),
            "of_which_finished_unacknowledged": len(unacked),
            "max_in_flight_per_kill": max((len(j) for j in in_flight.values()), default=0),
            "bound": len(kills) * CONCURRENCY,
            "reclaimed_leases": counters.get("lost", 0),
            "stale_finishes": counters.get("stale", 0),
            "max_recovery_s": round(max_recovery, 2),
            "mean_recovery_s": round(sum(recoveries) / len(recoveries), 2) if recoveries else 0,
            "elapsed_s": round(elapsed, 1),
        },
    )
