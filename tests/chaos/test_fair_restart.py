"""Fair keys through a Redis killed with SIGKILL mid-run and started again: the jobs of
six keys, each held to two running at once, all complete once in Redis, and no key ever
has more than two jobs running (counted from the ledger).

The server writes an append-only file with ``appendfsync always`` (whatever it
acknowledged survives the kill), as in test_redis_restart.py: the keys' lists, their
running sets and the set of ready keys come back with it, and the pools go on.
"""

from __future__ import annotations

import random
import time

import anyio
import pytest

from rota import Client, JobSpec
from tests.chaos.harness import (
    SHARDS,
    Audit,
    Fleet,
    Ledger,
    durations,
    enqueue,
    leftovers,
    pick,
    poll,
    processed_or_away,
    report,
    stats,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(1200, 5000)
KEYS = [f"tenant-{i}" for i in range(6)]
KEY_LIMIT = 2


def _set_limit(url: str, namespace: str) -> None:
    async def run() -> None:
        async with Client.from_url(url, namespace, shards=SHARDS) as client:
            await client.admin.fair.set_key_limit("work", None, KEY_LIMIT)

    anyio.run(run)


@pytest.mark.timeout(pick(180, 600))
def test_redis_restarted_mid_run_loses_no_keyed_job_and_no_key_passes_its_limit(
    aof_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger
) -> None:
    url = aof_server.url
    r = aof_server.client(socket_timeout=5)
    try:
        _set_limit(url, namespace)
        rng = random.Random(5)
        specs = [
            JobSpec(name="work", kwargs={"ms": ms}, fair_key=rng.choice(KEYS))
            for ms in durations(JOBS, 5, 25)
        ]
        ids = enqueue(url, namespace, specs)
        key_of = {job_id: spec.fair_key or "" for job_id, spec in zip(ids, specs, strict=True)}
        workers = [fleet.start(url, namespace, concurrency=10, lease=5) for _ in range(2)]
        poll(
            lambda: processed_or_away(r, namespace) >= JOBS // 4,
            within=60,
            what="a quarter of the jobs done",
            details=fleet.tails,
        )
        aof_server.kill()
        killed = time.monotonic()
        time.sleep(1.0)
        aof_server.start()
        poll(
            lambda: processed_or_away(r, namespace) >= JOBS,
            within=pick(120, 400),
            what="all keyed jobs done after the restart",
            details=fleet.tails,
        )
        recovered = time.monotonic() - killed
        assert [w for w in workers if not w.alive] == [], f"workers exited\n{fleet.tails()}"
        fleet.close()

        audit = Audit.of(r, namespace, ledger, ids)
        assert audit.lost == [], audit.explain(audit.lost, fleet)
        counters = stats(r, namespace)
        assert counters["processed"] == JOBS, counters
        assert set(leftovers(r, namespace, ["work"]).values()) == {0}
        assert audit.completed_twice == []
        # A job runs twice only when its lease was reclaimed (its pool cut off from
        # Redis for longer than the lease): each such run is a reclaimed lease.
        assert audit.duplicate_runs <= counters.get("lost", 0), counters
        most = audit.most_running(key_of, {}, held_only=True)
        assert max(most.values()) <= KEY_LIMIT, most
        assert max(most.values()) == KEY_LIMIT  # reached: the check above means something
        report(
            "fair_redis_restart",
            {
                "jobs": JOBS,
                "keys": len(KEYS),
                "all_done_after_kill_s": round(recovered, 1),
                "lost": len(audit.lost),
                "duplicate_runs": audit.duplicate_runs,
                "reclaimed_leases": counters.get("lost", 0),
                "most_running_per_key": max(most.values()),
            },
        )
    finally:
        r.close()
