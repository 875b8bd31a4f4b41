"""What the chaos tests do to a running fleet, shared: a fair key's limit set before the
jobs run, a worker process killed and another started in its place, Redis killed and
started again from its append-only file, and the run of a backlog through one such
restart with the checks every run of it makes (see tests/chaos/harness.py for the
worker processes, the ledger and the bookkeeping)."""

from __future__ import annotations

import math
import random
import time
from typing import Any, NamedTuple

import anyio

from rota import Client
from tests.chaos.harness import (
    SHARDS,
    Audit,
    Chaos,
    Fleet,
    Worker,
    leftovers,
    poll,
    processed_or_away,
    stats,
)
from tests.redis_server import RedisServer

__all__ = ["Restarted", "replace_one", "restart", "run_through_restart", "set_key_limit"]


def set_key_limit(url: str, namespace: str, name: str, limit: int) -> None:
    """Hold every fair key of ``name`` to ``limit`` jobs running at once."""

    async def run() -> None:
        async with Client.from_url(url, namespace, shards=SHARDS) as client:
            await client.admin.fair.set_key_limit(name, None, limit)

    anyio.run(run)


def replace_one(
    fleet: Fleet, rng: random.Random, url: str, namespace: str, **settings: Any
) -> Worker | None:
    """SIGKILL a worker process whose pool started a second ago or more and start
    another with ``settings`` in its place; the one killed. None when no pool has been
    up that long: on a busy host a process's imports alone take seconds, and one killed
    then holds no job, or its pool was up too briefly to reap a killed pool's leases."""
    ripe = [w for w in fleet.alive if time.time() - (w.up_at or math.inf) > 1.0]
    if not ripe:
        return None
    victim = rng.choice(ripe)
    victim.kill9()
    fleet.start(url, namespace, **settings)
    return victim


def restart(server: RedisServer, down: float) -> float:
    """SIGKILL ``server``, leave it down ``down`` s, start it again on its append-only
    file: the seconds from the kill until it answers."""
    server.kill()
    killed = time.monotonic()
    time.sleep(down)
    server.start()
    return time.monotonic() - killed


class Restarted(NamedTuple):
    """A backlog's run through a restart: what Redis and the ledger say after it."""

    audit: Audit
    counters: dict[str, int]
    workers: list[Worker]
    done_at_kill: int  # done lines in the ledger when Redis was killed
    down: float  # seconds from the kill until Redis answered
    recovered: float  # seconds from the kill until every job was done


def run_through_restart(
    server: RedisServer,
    chaos: Chaos,
    ids: list[str],
    names: list[str],
    within: float,
    **settings: Any,
) -> Restarted:
    """Two worker processes with ``settings`` run the jobs ``ids`` (of job ``names``);
    once a quarter is done Redis is killed, and started again a second later. Every job
    is then done within ``within`` s, no worker exited, and each job completed in Redis
    once (no job lost, every counter and queue as after a clean run)."""
    url, r, namespace, fleet, ledger = chaos
    jobs = len(ids)
    workers = [fleet.start(url, namespace, **settings) for _ in range(2)]
    poll(
        lambda: processed_or_away(r, namespace) >= jobs // 4,
        within=60,
        what="a quarter of the jobs done",
        details=fleet.tails,
    )
    done_at_kill = ledger.count("done")
    killed = time.monotonic()
    down = restart(server, 1.0)
    poll(
        lambda: processed_or_away(r, namespace) >= jobs,
        within=within,
        what="all jobs done after the restart",
        details=fleet.tails,
    )
    recovered = time.monotonic() - killed
    assert [w for w in workers if not w.alive] == [], f"workers exited\n{fleet.tails()}"
    fleet.close()
    audit = Audit.of(r, namespace, ledger, ids)
    assert audit.lost == [], audit.explain(audit.lost, fleet)
    counters = stats(r, namespace)
    assert counters["processed"] == jobs, counters
    assert set(leftovers(r, namespace, names).values()) == {0}
    return Restarted(audit, counters, workers, done_at_kill, down, recovered)
