"""Redis killed with SIGKILL mid-run and started again: the workers recover by themselves.

The server writes an append-only file with ``appendfsync always``, so whatever it
acknowledged survives the kill. The worker processes keep running through the outage
(their finishes wait and are sent again), reconnect, and every job completes exactly
once in Redis.
"""

from __future__ import annotations

import pytest

from tests.chaos.disrupt import run_through_restart
from tests.chaos.harness import Chaos, durations, enqueue_work, pick, report
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(1500, 5000)


@pytest.mark.timeout(pick(180, 600))
def test_redis_killed_and_restarted_mid_run_loses_no_job(
    aof_server: RedisServer, aof_chaos: Chaos
) -> None:
    ids = enqueue_work(aof_chaos.url, aof_chaos.namespace, durations(JOBS, 5, 25))
    run = run_through_restart(
        aof_server, aof_chaos, ids, ["work"], within=pick(90, 300), concurrency=10
    )
    audit, counters = run.audit, run.counters
    assert all(audit.accepted_result_ok(j) for j in ids)
    report(
        "redis_restart",
        {
            "jobs": JOBS,
            "processes": len(run.workers),
            "done_at_kill": run.done_at_kill,
            "redis_down_s": round(run.down, 2),
            "all_done_after_kill_s": round(run.recovered, 1),
            "lost": len(audit.lost),
            "duplicate_runs": audit.duplicate_runs,
            "reclaimed_leases": counters.get("lost", 0),
            "stale_finishes": counters.get("stale", 0),
        },
    )
