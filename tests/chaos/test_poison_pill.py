"""A poison pill: a job that kills every process that runs it.

Each attempt takes its process down; its lease expires and another pool's reaper gives
it back. After ``max_lost`` (3) lost attempts it is dead with reason ``lost`` instead of
killing workers forever, and every other job completes, each exactly once.
"""

from __future__ import annotations

import time

import pytest

from rota import JobSpec
from tests.chaos.harness import (
    Audit,
    Chaos,
    Worker,
    durations,
    enqueue,
    leftovers,
    pool_pid,
    processed,
    records,
    report,
    stats,
)

pytestmark = pytest.mark.chaos

NORMAL = 200
PROCESSES = 3
MAX_LOST = 3


@pytest.mark.timeout(120)
def test_poison_pill_is_dead_after_max_lost_and_the_rest_completes(
    chaos: Chaos,
) -> None:
    url, r, namespace, fleet, ledger = chaos
    quick = [JobSpec(name="work", kwargs={"ms": ms}) for ms in durations(NORMAL, 20, 40)]
    ids = enqueue(url, namespace, quick[: NORMAL // 2])
    (pill,) = enqueue(url, namespace, [JobSpec(name="suicide")])
    ids += enqueue(url, namespace, quick[NORMAL // 2 :])

    # One job at a time and no prefetch: a job a dying process held (running beside the
    # pill, or leased ahead of a free worker) is charged a lost attempt too, which would
    # blur the count below of jobs lost and run twice.
    settings = {
        "concurrency": 1,
        "prefetch": 0,
        "max_lost": MAX_LOST,
        "lease": 2,
        "heartbeat_interval": 0.5,
    }
    workers: list[Worker] = [fleet.start(url, namespace, **settings) for _ in range(PROCESSES)]
    deaths: list[int] = []

    def finished() -> bool:
        state = r.hget("{" + namespace + "}:job:" + pill, "state")
        return state == b"dead" and processed(r, namespace) >= NORMAL

    # supervise: restart any process that died
    started = time.monotonic()
    while not finished():
        if time.monotonic() - started > 90:
            raise AssertionError(f"not done after 90 s\n{fleet.tails()}")
        for i, w in enumerate(workers):
            if not w.alive:
                deaths.append(w.proc.returncode)
                workers[i] = fleet.start(url, namespace, **settings)
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    fleet.close()

    rec = records(r, namespace, [pill])[pill]
    assert (rec["state"], rec["reason"]) == ("dead", "lost"), rec
    assert (int(rec["lost"]), int(rec["attempts"])) == (MAX_LOST, MAX_LOST), rec
    assert "lease expired 3 times" in rec["error"]
    assert r.zrange("{" + namespace + "}:dead", 0, -1) == [pill.encode()]
    pill_starts = ledger.by_job("start")[pill]
    assert len(pill_starts) == MAX_LOST
    assert len({e.pid for e in pill_starts}) == MAX_LOST  # a new process each time
    assert deaths == [-9] * MAX_LOST, deaths  # each attempt killed its process, no other died

    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], audit.explain(audit.lost, fleet)
    # A normal job runs again only when the pill killed its process before its finish
    # was acknowledged (the finish is batched, the pill may be fetched first): every run
    # but the one recorded happened in a process the pill killed, and there is at most
    # one such run per death, since each process runs one job at a time. (The same job
    # can be hit twice: requeued at the front with the pill, it is again the job just
    # before it.)
    killed = {e.pid for e in pill_starts}
    strays = [
        audit.describe(j)
        for j in audit.jobs_run_twice
        if any(e.pid not in killed for e in audit.starts[j] if e.pid != pool_pid(audit.recs[j]))
    ]
    assert strays == [], strays
    assert audit.duplicate_runs <= len(deaths)
    counters = stats(r, namespace)
    assert counters["processed"] == NORMAL
    assert (counters["lost:suicide"], counters["dead"]) == (MAX_LOST, 1), counters
    assert counters.get("lost:work", 0) == len(audit.jobs_run_twice), counters
    sizes = leftovers(r, namespace, ["work", "suicide"])
    assert sizes.pop("dead") == 1
    assert set(sizes.values()) == {0}, sizes
    report(
        "poison_pill",
        {
            "normal_jobs": NORMAL,
            "processes_killed_by_the_pill": len(deaths),
            "pill_lost": int(rec["lost"]),
            "pill_reason": rec["reason"],
            "normal_lost": len(audit.lost),
            "normal_run_twice_finish_unsent_at_death": len(audit.jobs_run_twice),
            "elapsed_s": round(elapsed, 1),
        },
    )
