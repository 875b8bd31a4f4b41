"""Redis away for less than the lease: no job runs twice, none is lost, no pool dies.

docs/operations.md promises that a job runs a second time only when its pool lost Redis
for longer than the lease. Here three worker processes of ten run jobs of 100-300 ms
with a lease of 3 s and a heartbeat of 0.5 s, and Redis (append-only file,
``appendfsync always``) is killed with SIGKILL and started again after 1, 2 and 2.5 s,
the last one exactly the lease minus one heartbeat. Every attempt is counted in the
ledger outside Redis: each job starts exactly once.

What made such an outage run jobs twice: every task retried with one doubling delay
(up to 5 s, the heartbeat too, and redis-py's own retries inside each command), and a
pool's reaper came back before the heartbeats and reclaimed leases that had expired
while Redis was away. Now the heartbeat probes every 50 ms and wakes the other tasks
when it gets through, and a reaper waits one heartbeat interval of calm after an outage.
"""

from __future__ import annotations

import functools
import time

import pytest
import redis

from tests.chaos.disrupt import restart
from tests.chaos.harness import (
    Audit,
    Chaos,
    Ledger,
    Worker,
    durations,
    enqueue_work,
    pick,
    poll,
    processed_or_away,
    report,
    stats,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(2400, 6000)
OUTAGES = pick((1.0, 2.0, 2.5, 2.5, 2.0, 2.5), (1.0, 2.0, 2.5, 2.0, 2.5, 1.5, 2.5))
SETTINGS = {"concurrency": 10, "lease": 3, "heartbeat_interval": 0.5, "grace": 5}


def _done_at_least(r: redis.Redis, namespace: str, n: int) -> bool:
    return processed_or_away(r, namespace) >= n


def _started_more(ledger: Ledger, n: int) -> bool:
    return ledger.count("start") > n


GONE = "Redis cannot be reached"
BACK = "Redis takes every command again"


def _every_pool_back(workers: list[Worker], n: int) -> bool:
    """Whether each pool has ended ``n`` episodes (it logs so once no task of it failed
    for a while): an outage that came before would be part of the last one, one line
    for two outages, and the count of lines would depend on how fast a loaded host let
    the pool get through again."""
    return all(w.log.read_text(errors="replace").count(BACK) >= n for w in workers)


@pytest.mark.timeout(pick(240, 900))
def test_outages_shorter_than_the_lease_run_no_job_twice(
    aof_server: RedisServer, aof_chaos: Chaos
) -> None:
    url, r, namespace, fleet, ledger = aof_chaos
    ids = enqueue_work(url, namespace, durations(JOBS, 100, 300))
    workers = [fleet.start(url, namespace, **SETTINGS) for _ in range(3)]
    resumed: list[float] = []
    step = JOBS // (len(OUTAGES) + 1)
    for i, seconds in enumerate(OUTAGES):
        poll(
            functools.partial(_done_at_least, r, namespace, step * (i + 1)),
            within=120,
            what=f"{step * (i + 1)} jobs done before outage {i + 1}",
            details=fleet.tails,
        )
        started = ledger.count("start")
        restart(aof_server, seconds)
        back = time.monotonic()
        # Work resumes: a new attempt starts (jobs were queued all along).
        poll(
            functools.partial(_started_more, ledger, started + 30),
            within=30,
            what=f"work resumed after outage {i + 1}",
            details=fleet.tails,
        )
        resumed.append(round(time.monotonic() - back, 3))
        poll(
            functools.partial(_every_pool_back, workers, i + 1),
            within=30,
            what=f"every pool saw the end of outage {i + 1}",
            details=fleet.tails,
        )
    poll(
        lambda: processed_or_away(r, namespace) >= JOBS,
        within=pick(120, 400),
        what="all jobs done",
        details=fleet.tails,
    )
    dead = [w for w in workers if not w.alive]
    assert dead == [], f"workers exited\n{fleet.tails()}"
    fleet.close()
    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], audit.explain(audit.lost, fleet)
    assert audit.jobs_run_twice == [], audit.explain(audit.jobs_run_twice, fleet)
    counters = stats(r, namespace)
    assert counters["processed"] == JOBS, counters
    # A lease may be reclaimed only when a fetch's reply was cut off by the kill (no
    # pool holds that job): at most the jobs of one fetch per pool and outage.
    assert counters.get("lost", 0) <= 32 * 3 * len(OUTAGES), counters
    for w in workers:  # one line when Redis goes, per outage and pool, not one per task
        text = w.log.read_text(errors="replace")
        assert text.count(GONE) == len(OUTAGES), w.tail(60)
        assert "Redis had lost" not in text, w.tail(60)  # it lost nothing
    report(
        "short_outage",
        {
            "jobs": JOBS,
            "outages_s": list(OUTAGES),
            "work_resumed_after_s": resumed,
            "duplicate_runs": audit.duplicate_runs,
            "reclaimed_leases": counters.get("lost", 0),
            "stale_finishes": counters.get("stale", 0),
        },
    )
