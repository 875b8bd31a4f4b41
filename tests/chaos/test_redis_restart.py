"""Redis killed with SIGKILL mid-run and started again: the workers recover by themselves.

The server writes an append-only file with ``appendfsync always``, so whatever it
acknowledged survives the kill. The worker processes keep running through the outage
(their finishes wait and are sent again), reconnect, and every job completes exactly
once in Redis.
"""

from __future__ import annotations

import time

import pytest

from tests.chaos.harness import (
    Audit,
    Fleet,
    Ledger,
    durations,
    enqueue_work,
    leftovers,
    pick,
    poll,
    processed_or_away,
    report,
    stats,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(1500, 5000)


@pytest.mark.timeout(pick(180, 600))
def test_redis_killed_and_restarted_mid_run_loses_no_job(
    aof_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger
) -> None:
    url = aof_server.url
    r = aof_server.client(socket_timeout=5)
    try:
        ids = enqueue_work(url, namespace, durations(JOBS, 5, 25))
        workers = [fleet.start(url, namespace, concurrency=10) for _ in range(2)]
        poll(
            lambda: processed_or_away(r, namespace) >= JOBS // 4,
            within=60,
            what="a quarter of the jobs done",
            details=fleet.tails,
        )
        aof_server.kill()
        killed = time.monotonic()
        done_at_kill = ledger.count("done")
        time.sleep(1.0)
        aof_server.start()
        down = time.monotonic() - killed
        poll(
            lambda: processed_or_away(r, namespace) >= JOBS,
            within=pick(90, 300),
            what="all jobs done after the restart",
            details=fleet.tails,
        )
        recovered = time.monotonic() - killed
        dead = [w for w in workers if not w.alive]
        assert dead == [], f"workers exited\n{fleet.tails()}"
        fleet.close()

        audit = Audit.of(r, namespace, ledger, ids)
        assert audit.lost == [], audit.explain(audit.lost, fleet)
        counters = stats(r, namespace)
        assert counters["processed"] == JOBS, counters
        assert set(leftovers(r, namespace, ["work"]).values()) == {0}
        assert all(audit.accepted_result_ok(j) for j in ids)
        report(
            "redis_restart",
            {
                "jobs": JOBS,
                "processes": len(workers),
                "done_at_kill": done_at_kill,
                "redis_down_s": round(down, 2),
                "all_done_after_kill_s": round(recovered, 1),
                "lost": len(audit.lost),
                "duplicate_runs": audit.duplicate_runs,
                "reclaimed_leases": counters.get("lost", 0),
                "stale_finishes": counters.get("stale", 0),
            },
        )
    finally:
        r.close()
