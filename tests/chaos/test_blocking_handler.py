"""A handler that blocks the event loop for longer than the lease.

An ``async def`` handler that makes a blocking call (``time.sleep``, a synchronous
HTTP or database client, heavy CPU work) stops its whole pool: the heartbeat cannot
run, so the leases of every job of that pool expire after ``lease`` seconds. Another
pool's reaper then gives the job back to its queue as ``lost`` and it runs again. When
the blocked handler finally returns, its finish carries a retired fencing token: it is
rejected as stale (counted in the ``stale`` statistic) and changes nothing. Such a job
never completes: after ``max_lost`` lost attempts (default 3) it is dead with reason
``lost``, and each of those attempts ran to its end and was thrown away.

The same work as a plain ``def`` handler runs in a worker thread: the event loop stays
free, the heartbeat keeps extending the lease, and the job completes once, with no
lost attempt. Blocking work belongs in a plain ``def`` handler, or must be shorter than
the lease (or call ``ctx.checkin()``, which only helps if the loop gets to run it).
"""

from __future__ import annotations

import pytest

from rota import JobSpec
from tests.chaos.harness import Chaos, enqueue, poll, records, report, stats

pytestmark = pytest.mark.chaos

LEASE = 1.5
HEARTBEAT = 0.3
MAX_LOST = 3
SETTINGS = {
    "concurrency": 2,
    "lease": LEASE,
    "heartbeat_interval": HEARTBEAT,
    "max_lost": MAX_LOST,
}


@pytest.mark.timeout(120)
def test_async_handler_blocking_the_loop_is_lost_each_time_and_ends_dead(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    pools = [fleet.start(url, namespace, **SETTINGS) for _ in range(2)]
    poll(
        lambda: r.zcard("{" + namespace + "}:pools") == 2,
        within=30,
        what="both pools beating",
        details=fleet.tails,
    )
    (job,) = enqueue(url, namespace, [JobSpec(name="blocker", kwargs={"seconds": 3 * LEASE})])

    def dead_and_every_late_finish_seen() -> bool:
        rec = records(r, namespace, [job])[job]
        return rec.get("state") == "dead" and stats(r, namespace).get("stale", 0) >= MAX_LOST

    poll(
        dead_and_every_late_finish_seen,
        within=60,
        what="dead after max_lost, with every late finish rejected",
        details=fleet.tails,
    )
    assert all(p.alive for p in pools), fleet.tails()
    fleet.close()

    rec = records(r, namespace, [job])[job]
    assert (rec["state"], rec["reason"]) == ("dead", "lost"), rec
    assert (int(rec["lost"]), int(rec["attempts"])) == (MAX_LOST, MAX_LOST), rec
    assert rec.get("failures", "0") == "0" and "result" not in rec, rec
    counters = stats(r, namespace)
    # every blocked attempt ran to its end, and every one of its finishes was rejected
    assert counters["stale"] == MAX_LOST, counters
    assert counters["lost"] == MAX_LOST, counters
    assert "processed" not in counters, counters
    starts, dones = ledger.by_job("start")[job], ledger.by_job("done")[job]
    assert sorted(e.attempt for e in starts) == [1, 2, 3]
    assert sorted(e.attempt for e in dones) == [1, 2, 3]
    report(
        "blocking_async_handler",
        {
            "lease_s": LEASE,
            "blocked_s": 3 * LEASE,
            "attempts": int(rec["attempts"]),
            "lost": int(rec["lost"]),
            "stale_finishes": counters["stale"],
            "state": rec["state"],
            "reason": rec["reason"],
            "time_to_dead_s": round((int(rec["finished_at"]) / 1000) - starts[0].t, 1),
        },
    )


@pytest.mark.timeout(120)
def test_sync_handler_in_a_thread_keeps_its_lease(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    pools = [fleet.start(url, namespace, **SETTINGS) for _ in range(2)]
    (job,) = enqueue(url, namespace, [JobSpec(name="sync_blocker", kwargs={"seconds": 3 * LEASE})])
    poll(
        lambda: records(r, namespace, [job])[job].get("state") == "complete",
        within=60,
        what="the thread's job complete",
        details=fleet.tails,
    )
    assert all(p.alive for p in pools), fleet.tails()
    fleet.close()

    rec = records(r, namespace, [job])[job]
    assert (int(rec["attempts"]), int(rec["lost"])) == (1, 0), rec
    counters = stats(r, namespace)
    assert counters["processed"] == 1, counters
    assert "lost" not in counters and "stale" not in counters, counters
    starts, dones = ledger.by_job("start")[job], ledger.by_job("done")[job]
    assert (len(starts), len(dones)) == (1, 1)
    assert dones[0].t - starts[0].t >= 3 * LEASE
    report(
        "blocking_sync_handler",
        {
            "lease_s": LEASE,
            "blocked_s": 3 * LEASE,
            "attempts": int(rec["attempts"]),
            "lost": int(rec["lost"]),
            "state": rec["state"],
        },
    )
