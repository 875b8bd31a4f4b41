"""Diamonds of dependent jobs while worker processes are killed with SIGKILL every 2 s.

Each diamond is four ``flow`` jobs: A; B and C after A; D after B and C, enqueued in one
``enqueue_many`` call. Diamonds are enqueued at a steady pace while three worker
processes run them; every 2 s one of the processes is killed with SIGKILL and a new one
started, until the last diamond is enqueued. Then every job must complete, and:

- every child (B, C, D) first starts after the done line of each parent's completing
  attempt: the attempt whose finish was accepted, named by the stored result (pid,
  attempt, token). A parent killed after its handler returned but before its finish
  was sent runs again, and its child waits for that second run;
- the child was handed exactly those results in ``ctx.parent_results``;
- a job runs more than once only when the process that ran its earlier attempt was
  killed;
- nothing is left in ``{ns}:waiting``, a queue, a running set or the dead set.

``CHAOS_LENGTH=full`` runs 400 diamonds over about 50 s of kills;
``CHAOS_DIAMONDS=n`` sets any other number.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import anyio.from_thread
import pytest

from rota import Client, JobSpec
from tests.chaos.harness import (
    Audit,
    Chaos,
    Entry,
    Worker,
    leftovers,
    pick,
    pool_pid,
    processed,
    report,
    stats,
)

pytestmark = pytest.mark.chaos

#: CHAOS_DIAMONDS overrides the number of diamonds, for a longer soak than the full form's.
DIAMONDS = int(os.environ.get("CHAOS_DIAMONDS") or pick(100, 400))
#: Diamonds are enqueued evenly over this many seconds, the time of the kills.
SECONDS_PER_DIAMOND = pick(0.14, 0.125)
PROCESSES = 3
CONCURRENCY = 10
KILL_EVERY = 2.0
LEASE = 2.0
#: Each step sleeps this long (ms): long enough that a kill finds steps running.
LOW_MS, HIGH_MS = 10.0, 200.0
ROLES = "abcd"
PARENTS = {"a": "", "b": "a", "c": "a", "d": "bc"}


def diamond(i: int, rng: random.Random) -> list[JobSpec]:
    """The four jobs of diamond ``i``, parents first (``after`` may name a job earlier
    in the same call)."""
    return [
        JobSpec(
            name="flow",
            kwargs={"ms": round(rng.uniform(LOW_MS, HIGH_MS), 1)},
            job_id=f"{i:04d}-{role}",
            after=tuple(f"{i:04d}-{p}" for p in PARENTS[role]),
        )
        for role in ROLES
    ]


def parents_of(job_id: str) -> list[str]:
    head, role = job_id.rsplit("-", 1)
    return [f"{head}-{p}" for p in PARENTS[role]]


def completing(audit: Audit, job_id: str) -> Entry:
    """The done line of the attempt whose finish was accepted. Its pid, attempt and token
    are the stored result: the job's last attempt, with the token the finish retired."""
    rec = audit.recs[job_id]
    pid, attempt, token, _ = json.loads(rec["result"])
    assert attempt == int(rec["attempts"]), audit.describe(job_id)
    assert -token == int(rec["token"]), audit.describe(job_id)
    assert pid == pool_pid(rec), audit.describe(job_id)
    lines = [e for e in audit.dones.get(job_id, []) if (e.pid, e.attempt) == (pid, attempt)]
    assert len(lines) == 1, audit.describe(job_id)
    return lines[0]


@pytest.mark.timeout(pick(120, 400))
def test_diamonds_run_in_order_while_workers_are_killed(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    total = DIAMONDS * len(ROLES)
    # A job in flight at several kills in a row would be taken for a poison pill and
    # made dead (max_lost): here every job must complete.
    settings = {
        "concurrency": CONCURRENCY,
        "lease": LEASE,
        "heartbeat_interval": 0.5,
        "max_lost": 10,
    }
    for _ in range(PROCESSES):
        fleet.start(url, namespace, **settings)

    rng = random.Random(3)
    ids: list[str] = []
    kills: list[tuple[Worker, float]] = []

    async def connect() -> Client:
        return Client.from_url(url, namespace)

    with anyio.from_thread.start_blocking_portal() as portal:
        client = portal.call(connect)
        try:
            started = time.monotonic()
            next_kill = started + KILL_EVERY
            while len(ids) < total:
                now = time.monotonic()
                i = len(ids) // len(ROLES)
                if now >= started + i * SECONDS_PER_DIAMOND:
                    jobs = portal.call(client.enqueue_many, diamond(i, rng))
                    assert all(j.created for j in jobs)
                    ids += [j.id for j in jobs]
                if now >= next_kill:
                    # a process that has had time to start working, the oldest when none has
                    alive = fleet.alive
                    ripe = [w for w in alive if time.time() - w.started > 1.0] or alive[:1]
                    victim = rng.choice(ripe)
                    kills.append((victim, victim.kill9()))
                    fleet.start(url, namespace, **settings)
                    next_kill += KILL_EVERY
                time.sleep(0.005)
            enqueued_in = time.monotonic() - started
        finally:
            portal.call(client.close)

    # No more kills: the jobs of the last victims come back when their leases expire.
    waiting_key = "{" + namespace + "}:waiting"
    grace = 30 + 2 * LEASE
    deadline = time.monotonic() + grace
    while processed(r, namespace) < total:
        if time.monotonic() > deadline:
            recs = Audit.of(r, namespace, ledger, ids).recs
            undone = [j for j in ids if recs[j].get("state") != "complete"]
            raise AssertionError(
                f"{processed(r, namespace)} of {total} jobs complete {grace:.0f} s after"
                f" the last enqueue; {r.zcard(waiting_key)} waiting; not complete:"
                f" {[(j, recs[j].get('state'), recs[j].get('pending')) for j in undone[:10]]}"
                f"\n{fleet.tails()}"
            )
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    survivors = [w for w in fleet.workers if w.killed_at is None]
    assert all(w.alive for w in survivors), f"a worker died by itself\n{fleet.tails()}"
    fleet.close()

    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], f"not complete: {audit.explain(audit.lost, fleet)}"
    counters = stats(r, namespace)
    assert counters["processed"] == total, counters
    assert r.zcard(waiting_key) == 0, r.zrange(waiting_key, 0, 9)
    assert set(leftovers(r, namespace, ["flow"]).values()) == {0}, leftovers(r, namespace, ["flow"])

    done = {j: completing(audit, j) for j in ids}
    results = {j: json.loads(audit.recs[j]["result"]) for j in ids}

    # Every child starts after its parents' completing attempts, and reads their results.
    early: list[str] = []
    wrong_results: list[str] = []
    gaps: list[float] = []
    for j in ids:
        parents = parents_of(j)
        if not parents:
            continue
        first = min(e.t for e in audit.starts[j])
        for p in parents:
            gaps.append(first - done[p].t)
            if first <= done[p].t:
                early.append(j)
        if results[j][3] != {p: results[p] for p in parents}:
            wrong_results.append(j)
    assert early == [], "started before a parent completed:\n" + "\n".join(
        audit.describe(x) for j in early[:3] for x in (*parents_of(j), j)
    )
    assert wrong_results == [], "\n".join(audit.describe(j) for j in wrong_results[:5])

    # An attempt other than the completing one ran only in a process that was killed.
    killed = {victim.pid for victim, _ in kills}
    strays = [
        j
        for j in ids
        for e in audit.starts[j]
        if (e.pid, e.attempt) != (done[j].pid, done[j].attempt) and e.pid not in killed
    ]
    assert strays == [], "run again without a kill:\n" + audit.explain(strays, fleet)
    rerun_parents = [j for j in ids if j in audit.jobs_run_twice and j.endswith(("-a", "-b", "-c"))]
    # parents whose handler returned in a killed process, whose finish never arrived
    unacked = [j for j in ids if any(e.pid != done[j].pid for e in audit.dones.get(j, []))]

    figures: dict[str, Any] = {
        "diamonds": DIAMONDS,
        "jobs": total,
        "processes": PROCESSES,
        "concurrency": CONCURRENCY,
        "lease_s": LEASE,
        "kills": len(kills),
        "completed": counters["processed"],
        "duplicate_runs": audit.duplicate_runs,
        "jobs_run_twice": len(audit.jobs_run_twice),
        "d_run_twice": sum(j.endswith("-d") for j in audit.jobs_run_twice),
        "parents_run_twice": len(rerun_parents),
        "finished_unacknowledged": len(unacked),
        "most_runs_of_one_job": max(len(v) for v in audit.starts.values()),
        "reclaimed_leases": counters.get("lost", 0),
        "stale_finishes": counters.get("stale", 0),
        "min_gap_parent_done_to_child_start_ms": round(min(gaps) * 1000, 2),
        "enqueued_in_s": round(enqueued_in, 1),
        "elapsed_s": round(elapsed, 1),
    }
    report("workflow_sigkill", figures)
