"""Jobs with an expiry through SIGKILLs of the pools and a restart of Redis: no expired
job starts, none is lost.

A backlog of ``work`` jobs and of ``brief`` jobs without an expiry keeps three worker
processes busy; among the ``brief`` jobs are several hundred with short expiries: some
queued behind the backlog (they expire there), some scheduled past their expiry (they
expire in the scheduled set), some that fail their first attempt and wait a second to
be retried (they expire in the retry set, or behind the backlog, or run again in time),
some with expiries spread over the run, some with long ones (they complete), and
jobs of a handler whose default expiry (one second) only the pools know, behind a
backlog of their own queue: only the fetch and the pool end those. Every
second a worker process whose pool has started is killed with SIGKILL and a new one
started; once, mid-run,
Redis is killed and started again from its append-only file (``appendfsync always``).

Then every record is read. Each job completed, or ended dead with reason ``expired``
after its expiry; none is anywhere else. No attempt started at or after its job's
expiry: a ``brief`` job's ledger start line holds the pool's own start of the attempt.
An expired job that had started did so in time, and that attempt either failed on
purpose or ran in a process that was killed before its finish was accepted.

``CHAOS_LENGTH=full`` runs four times as many jobs.
"""

from __future__ import annotations

import itertools
import random
import time

import pytest
import redis

from rota import JobSpec
from tests.chaos import harness
from tests.chaos.app import LAPSE
from tests.chaos.disrupt import replace_one, restart
from tests.chaos.harness import Audit, Chaos, Worker, enqueue, pick
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

#: The full form: four times as many jobs of every kind.
SCALE = pick(1, 4)
PROCESSES = 3
KILL_EVERY = 1.0
#: Redis goes away this long after the jobs with an expiry are enqueued, for DOWN s.
RESTART_AFTER = 2.5
DOWN = 1.0
SETTINGS = {"concurrency": 10, "lease": 2.0, "heartbeat_interval": 0.5, "max_lost": 10}
#: The longest a job with an expiry of its own may stay unended past it while pools serve
#: (docs/operations.md: it ends within a scheduler tick of its expiry, which wakes for it;
#: a job a killed pool had leased comes back when its lease lapses): the lease, a reaper's
#: pause (one to 1.5 heartbeat intervals), its wait for calm after the outage (one interval
#: in the pool, two more in Redis's view of the heartbeats), and a fetch's wake. The time
#: no pool served at all (a worker's start-up, the outage, a host too busy to run them),
#: measured in the run, comes on top: no pool ends a job then.
LATE = (
    SETTINGS["lease"]
    + (1.5 + 1 + 2) * SETTINGS["heartbeat_interval"]
    + harness.BASE_SETTINGS["wake_timeout"]
)


def _specs(rng: random.Random) -> dict[str, list[JobSpec]]:
    """The jobs with an expiry and the ``brief`` backlog, by kind, in enqueue order."""

    def brief(
        n: int, fails: int = 0, name: str = "brief", ms: float = 20, **options: float
    ) -> list[JobSpec]:
        return [
            JobSpec(
                name=name,
                kwargs={"ms": round(rng.uniform(ms, 3 * ms), 1), "fails": fails},
                **options,  # type: ignore[arg-type]
            )
            for _ in range(n)
        ]

    retrying = [brief(1, fails=1, expires_in=rng.uniform(0.6, 4.0))[0] for _ in range(100 * SCALE)]
    backlog = brief(500 * SCALE)
    spread = [brief(1, expires_in=rng.uniform(0.5, 8.0))[0] for _ in range(150 * SCALE)]
    # the spread jobs among the backlog, in random places
    mixed = backlog + spread
    rng.shuffle(mixed)
    scheduled = []
    for _ in range(100 * SCALE):
        delay = rng.uniform(1.0, 5.0)
        scheduled += brief(1, delay=delay, expires_in=rng.uniform(0.3, delay - 0.2))
    # The handler's default expiry (LAPSE s) behind a backlog of the same queue whose
    # jobs have long expiries of their own. Their jobs are longer: each pool leases up
    # to its prefetch ahead of its workers, so many wait in the pool past their expiry.
    lapsing = brief(200 * SCALE, name="lapsing", ms=70, expires_in=120.0)
    lapsing += brief(150 * SCALE, name="lapsing", ms=70)
    rng.shuffle(lapsing)
    return {
        "retrying": retrying,
        "lapsing": lapsing,
        "mixed": mixed,
        "queued": brief(150 * SCALE, expires_in=1.0),
        "scheduled": scheduled,
        "in_time": brief(50 * SCALE, expires_in=120.0),
        "scheduled_in_time": brief(50 * SCALE, delay=1.0, expires_in=120.0),
    }


def _ended(r: redis.Redis, namespace: str) -> int:
    """Jobs complete or dead so far; -1 while Redis is away or loading."""
    try:
        counters = harness.stats(r, namespace)
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return -1
    return counters.get("processed", 0) + counters.get("dead", 0)


def _stalled(starts: list[float], since: float, until: float) -> float:
    """How long no pool served between ``since`` and ``until``: the gaps longer than a
    heartbeat interval between attempt starts (``starts``, sorted, taken while a backlog
    waited: a pool that serves starts one every few ms), as far as they fall inside."""
    gaps = itertools.pairwise(starts)
    long = [(a, b) for a, b in gaps if b - a > SETTINGS["heartbeat_interval"]]
    return sum(max(0.0, min(b, until) - max(a, since)) for a, b in long)


@pytest.mark.timeout(pick(180, 600))
def test_expiry_through_sigkills_and_a_redis_restart_no_expired_job_starts_none_lost(
    aof_server: RedisServer, aof_chaos: Chaos
) -> None:
    rng = random.Random(42)
    url, r, namespace, fleet, ledger = aof_chaos
    work = [
        JobSpec(name="work", kwargs={"ms": ms}) for ms in harness.durations(1500 * SCALE, 20, 60)
    ]
    # The workers first, busy with the start of the backlog: the short expiries
    # below then count from a running fleet, not from its imports.
    ids = enqueue(url, namespace, work)
    for _ in range(PROCESSES):
        fleet.start(url, namespace, **SETTINGS)
    harness.poll(
        lambda: ledger.count("done") >= 30, within=60, what="workers up", details=fleet.tails
    )
    kinds = _specs(rng)
    expiring = {k: enqueue(url, namespace, specs) for k, specs in kinds.items()}
    enqueued, enqueued_at = time.monotonic(), time.time()
    every = ids + [j for group in expiring.values() for j in group]

    killed: list[Worker] = []
    restarted = False
    deadline = enqueued + pick(150, 540)
    next_kill = enqueued + KILL_EVERY
    while _ended(r, namespace) < len(every):
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(
                f"{_ended(r, namespace)} of {len(every)} jobs ended after"
                f" {now - enqueued:.0f} s, {len(killed)} kills\n{fleet.tails()}"
            )
        if not restarted and now >= enqueued + RESTART_AFTER:
            restart(aof_server, DOWN)
            restarted = True
        elif now >= next_kill:
            victim = replace_one(fleet, rng, url, namespace, **SETTINGS)
            killed += [victim] if victim else []
            next_kill += KILL_EVERY
        time.sleep(0.02)
    elapsed = time.monotonic() - enqueued
    assert restarted, f"every job ended within {RESTART_AFTER} s: the restart came too late"
    survivors = [w for w in fleet.workers if w.killed_at is None]
    assert all(w.alive for w in survivors), f"a worker died by itself\n{fleet.tails()}"
    fleet.close()

    audit = Audit.of(r, namespace, ledger, every)
    killed_pids = {w.pid for w in killed}
    fails = {
        j: int(s.kwargs.get("fails", 0))
        for k in kinds
        for j, s in zip(expiring[k], kinds[k], strict=True)
    }

    # The work backlog and every job without an expiry: complete, as in any run.
    lapsing = {
        j
        for j, s in zip(expiring["lapsing"], kinds["lapsing"], strict=True)
        if s.expires_in is None
    }
    no_expiry = ids + [
        j for j, s in zip(expiring["mixed"], kinds["mixed"], strict=True) if s.expires_in is None
    ]
    incomplete = [j for j in no_expiry if audit.recs[j].get("state") != "complete"]
    assert incomplete == [], audit.explain(incomplete, fleet)

    # While the work backlog lasts a pool that serves starts an attempt every few ms.
    last_work = max(e.t for j in ids for e in audit.starts.get(j, []))
    served = sorted(
        e.t for entries in audit.starts.values() for e in entries if enqueued_at < e.t < last_work
    )
    served_at = [enqueued_at, *served, last_work]
    stall = max(b - a for a, b in itertools.pairwise(served_at))
    outcome: dict[str, list[str]] = {"completed": [], "expired": [], "other": []}
    late_starts, bad_expired, ends_late = [], [], []
    lateness: dict[bool, list[float]] = {True: [], False: []}  # by: in {ns}:expiring
    for j in (j for group in expiring.values() for j in group):
        rec = audit.recs[j]
        if j in lapsing:  # the handler's default, which the record does not hold
            expires = int(rec["enqueued_at"]) / 1000 + LAPSE
        elif "expires" in rec:
            expires = int(rec["expires"]) / 1000
        else:
            continue  # a backlog job among the mixed ones: checked above
        starts = audit.starts.get(j, [])
        # no attempt started at or after the expiry
        if any(e.t >= expires for e in starts):
            late_starts.append(j)
        if rec.get("state") == "complete" and rec.get("reason") != "expired":
            outcome["completed"].append(j)
        elif rec.get("state") == "dead" and rec.get("reason") == "expired":
            outcome["expired"].append(j)
            finished = int(rec["finished_at"]) / 1000
            # A job's own expiry is in {ns}:expiring: it ends on time, however long
            # the queue. A handler's default only the fetch and the pools know: the
            # job ends when a fetch reaches it, which may be later.
            own = j not in lapsing
            late = finished - expires
            lateness[own].append(late)
            if finished < expires or (
                own and late > LATE and late - _stalled(served_at, expires, finished) > LATE
            ):
                ends_late.append(j)
            # An attempt of an expired job failed on purpose, or ran in a process
            # killed before its finish was accepted: none ran to an accepted end.
            if any(e.attempt > fails[j] and e.pid not in killed_pids for e in starts):
                bad_expired.append(j)
        else:
            outcome["other"].append(j)
    assert outcome["other"] == [], "lost: " + audit.explain(outcome["other"], fleet)
    assert late_starts == [], "started after the expiry: " + audit.explain(late_starts, fleet)
    assert bad_expired == [], "expired after a run: " + audit.explain(bad_expired, fleet)
    assert ends_late == [], (
        f"ended off its expiry (more than {LATE:.2f} s late beyond the time no pool served): "
        + audit.explain(ends_late, fleet)
    )
    completed_no_done = [j for j in outcome["completed"] if not audit.dones.get(j)]
    assert completed_no_done == [], audit.explain(completed_no_done, fleet)
    # The check of late starts weighed start lines: every completed job has one.
    completed_no_start = [j for j in outcome["completed"] if not audit.starts.get(j)]
    assert completed_no_start == [], audit.explain(completed_no_start, fleet)

    # Each kind reached the ends it was made for.
    def ends(kind: str) -> tuple[int, int]:
        group = set(expiring[kind])
        return (
            len(group & set(outcome["completed"])),
            len(group & set(outcome["expired"])),
        )

    assert ends("queued")[1] > 0 and ends("scheduled") == (0, len(expiring["scheduled"]))
    assert ends("lapsing")[1] > 0
    assert ends("in_time") == (len(expiring["in_time"]), 0)
    assert ends("scheduled_in_time") == (len(expiring["scheduled_in_time"]), 0)
    expired_retrying = set(expiring["retrying"]) & set(outcome["expired"])
    assert any(audit.starts.get(j) for j in expired_retrying), "none expired once retrying"
    unstarted = [j for j in outcome["expired"] if not audit.starts.get(j)]

    counters = harness.stats(r, namespace)
    assert counters["processed"] == len(no_expiry) + len(outcome["completed"]), counters
    sizes = harness.leftovers(r, namespace, ["work", "brief", "lapsing"])
    assert sizes.pop("dead") == len(outcome["expired"]), sizes
    assert set(sizes.values()) == {0}, sizes
    harness.report(
        "expiry_sigkill_restart",
        {
            "jobs": len(every),
            "with_expiry": len(every) - len(no_expiry),
            "processes": PROCESSES,
            "kills": len(killed),
            "redis_restarts": 1,
            "completed": counters["processed"],
            "completed_with_expiry": len(outcome["completed"]),
            "expired": len(outcome["expired"]),
            "expired_unstarted": len(unstarted),
            "expired_after_a_cut_attempt": len(outcome["expired"]) - len(unstarted),
            "expired_by_kind": {k: ends(k)[1] for k in expiring},
            "started_late": len(late_starts),
            "lost": len(outcome["other"]),
            "max_end_after_own_expiry_s": round(max(lateness[True], default=0.0), 2),
            "max_end_after_default_expiry_s": round(max(lateness[False], default=0.0), 2),
            "own_expiry_bound_s": round(LATE, 2),
            "longest_stall_s": round(stall, 2),
            "duplicate_runs": audit.duplicate_runs,
            "elapsed_s": round(elapsed, 1),
        },
    )
