"""SIGTERM in the middle of a run: the process drains, exits 0, and loses nothing.

Jobs that finish within the grace period finish; jobs that do not are cancelled and put
back at the front of their queue without counting a failure, and the next process
runs them. No job completes twice.
"""

from __future__ import annotations

import signal
import time
from typing import cast

import pytest

from rota import JobSpec
from tests.chaos.harness import (
    Audit,
    Chaos,
    durations,
    enqueue,
    leftovers,
    poll,
    processed,
    records,
    report,
)

pytestmark = pytest.mark.chaos

GRACE = 1.0
LONG_MS = 4000
LONG_JOBS = 3
QUICK_JOBS = 400


@pytest.mark.timeout(120)
@pytest.mark.one_shard("reads one shard's queue")
def test_sigterm_drains_and_requeues_jobs_longer_than_the_grace(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    # the long jobs first: the queue is FIFO, so they start at once
    specs = [JobSpec(name="work", kwargs={"ms": LONG_MS}) for _ in range(LONG_JOBS)]
    specs += [JobSpec(name="work", kwargs={"ms": ms}) for ms in durations(QUICK_JOBS, 20, 60)]
    ids = enqueue(url, namespace, specs)
    long_ids = ids[:LONG_JOBS]
    settings = {"concurrency": 8, "grace": GRACE}
    first = fleet.start(url, namespace, **settings)

    poll(
        lambda: all(j in ledger.by_job("start") for j in long_ids) and ledger.count("done") >= 20,
        within=30,
        what="the long jobs start and some quick ones finish",
        details=fleet.tails,
    )
    first.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    try:
        code = first.proc.wait(timeout=GRACE + 10)
    except Exception:
        raise AssertionError(f"no exit after SIGTERM\n{fleet.tails()}") from None
    exit_after = time.monotonic() - signalled
    assert code == 0, fleet.tails()
    assert exit_after < GRACE + 5, exit_after

    # the long jobs are back in their queue, at the popping end, without a failure
    p = "{" + namespace + "}:"
    recs = records(r, namespace, long_ids)
    for j in long_ids:
        assert (recs[j]["state"], recs[j].get("failures", "0")) == ("queued", "0"), recs[j]
    queue = [i.decode() for i in cast(list[bytes], r.lrange(p + "queue:work", 0, -1))]
    assert set(queue[-LONG_JOBS:]) == set(long_ids)
    assert r.zcard(p + "running:work") == 0
    assert r.zcard(p + "pools") == 0  # it said goodbye
    done_before = processed(r, namespace)

    fleet.start(url, namespace, **settings)
    poll(
        lambda: processed(r, namespace) >= len(ids), within=60, what="all done", details=fleet.tails
    )
    fleet.close()

    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], audit.explain(audit.lost, fleet)
    assert audit.completed_twice == [], [audit.describe(j) for j in audit.completed_twice]
    assert processed(r, namespace) == len(ids)
    assert set(leftovers(r, namespace, ["work"]).values()) == {0}
    # run twice: the long jobs (cancelled at the end of the grace) and nothing else
    assert set(audit.jobs_run_twice) == set(long_ids)
    recs = records(r, namespace, long_ids)
    assert all(recs[j]["failures"] == "0" and recs[j]["lost"] == "0" for j in long_ids)
    report(
        "sigterm",
        {
            "jobs": len(ids),
            "grace_s": GRACE,
            "exit_code": code,
            "exit_after_s": round(exit_after, 2),
            "done_before_sigterm_exit": done_before,
            "requeued_long_jobs": LONG_JOBS,
            "lost": len(audit.lost),
            "completed_twice": len(audit.completed_twice),
        },
    )
