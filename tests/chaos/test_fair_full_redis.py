"""Fair keys on a Redis out of memory: a backlog of keyed jobs (eight keys, each held to
two running at once) drains through pools that start on a Redis refusing every write
that grows its memory, as the plain jobs of test_full_redis.py do: every job runs once,
no key ever has more than two jobs running (counted from the ledger), and nothing of
the keys is left behind. Fetching and finishing a keyed job that keeps nothing frees
memory (its id leaves its key's list, its record goes), so Redis runs them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import anyio
import pytest

from rota import Client, JobSpec
from tests.chaos.harness import SHARDS, Audit, Fleet, Ledger, enqueue, leftovers, pick, poll, report
from tests.chaos.test_full_redis import all_done, count_runs, refuses_writes
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

JOBS = pick(4000, 40_000)
KEYS = [f"tenant-{i}" for i in range(8)]
KEY_LIMIT = 2


@pytest.fixture
def keyed_full_server() -> Iterator[RedisServer]:
    # comfortably above what the backlog needs until the test lowers it
    server = RedisServer(["--maxmemory-policy", "noeviction", "--maxmemory", "512mb"])
    try:
        yield server
    finally:
        server.close()


def _set_limit(url: str, namespace: str) -> None:
    async def run() -> None:
        async with Client.from_url(url, namespace, shards=SHARDS) as client:
            await client.admin.fair.set_key_limit("drain", None, KEY_LIMIT)

    anyio.run(run)


@pytest.mark.timeout(pick(150, 600))
def test_keyed_jobs_drain_a_full_redis_once_each_within_their_key_limits(
    keyed_full_server: RedisServer, namespace: str, fleet: Fleet, ledger: Ledger
) -> None:
    url = keyed_full_server.url
    r = keyed_full_server.client(socket_timeout=10)
    p = "{" + namespace + "}:"
    try:
        empty = int(r.info("memory")["used_memory"])
        _set_limit(url, namespace)
        rng = random.Random(11)
        specs = [
            JobSpec(name="drain", kwargs={"ms": 2.0}, fair_key=rng.choice(KEYS))
            for _ in range(JOBS)
        ]
        ids = enqueue(url, namespace, specs)
        key_of = {job_id: spec.fair_key or "" for job_id, spec in zip(ids, specs, strict=True)}
        r.config_set("maxmemory", str(empty * 3 // 4))  # below an empty server's: held
        assert refuses_writes(r), r.info("memory")

        started = time.monotonic()
        workers = [fleet.start(url, namespace) for _ in range(2)]
        poll(
            lambda: all_done(ledger, ids),
            within=pick(120, 500),
            what=f"all {JOBS} keyed jobs done on a full Redis",
            details=fleet.tails,
        )
        drained = time.monotonic() - started
        assert refuses_writes(r), r.info("memory")  # the condition held all along
        assert [w.alive for w in workers] == [True, True], fleet.tails()

        lost, twice, done_twice = count_runs(ledger, ids)
        assert lost == [] and done_twice == [], (lost[:5], done_twice[:5])
        assert twice == [], twice[:5]  # no pool died and none was cut off from Redis
        starts, dones = ledger.by_job("start"), ledger.by_job("done")
        most = Audit(ids, {}, starts, dones).most_running(key_of, {})
        assert max(most.values()) <= KEY_LIMIT, most
        assert max(most.values()) == KEY_LIMIT  # reached: the check above means something
        poll(
            lambda: set(leftovers(r, namespace, ["drain"]).values()) == {0},
            within=10,
            what="the last finishes recorded",
            details=fleet.tails,
        )
        kinds = ("fqueue", "frun", "fkeys", "frest", "fbacklog")
        left = [k for kind in kinds for k in r.scan_iter(match=p + kind + ":*")]
        assert left == [], left  # idle keys are forgotten, a full Redis or not
        report(
            "fair_full_redis",
            {"jobs": JOBS, "keys": len(KEYS), "drained_s": round(drained, 1), "lost": len(lost)},
        )
    finally:
        r.config_set("maxmemory", "0")
        r.close()
