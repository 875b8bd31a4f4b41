"""Sentinel: the primary killed with SIGKILL mid-run; pools follow the new primary.

A primary, one replica and three sentinels. Worker pools run in two processes, started
with a ``redis+sentinel://`` URL; the test process enqueues jobs all along (each batch
with its own ids, sent again until accepted). When a third of the jobs are accepted the
primary is killed with SIGKILL; the sentinels promote the replica, the pools reconnect
to it by themselves, and the old server is started again as the new primary's replica
(so that durable enqueues can be acknowledged again; it comes back empty, and as a
primary it could empty the new one: see ``SentinelGroup.rejoin``).

Replication is asynchronous: a job the old primary acknowledged but had not yet sent to
the replica is gone with it. On loopback the replica is a fraction of a millisecond
behind (and what the primary wrote to the replication socket before SIGKILL still
reaches the replica), so the test opens the window as a network hiccup would: the
replica is stopped (SIGSTOP), its replication link cut on the primary, and the primary
killed ``STALL`` seconds later. With ``durable_enqueue`` (``WAIT 1``) an enqueue
returns only once the replica has it, so no accepted job is lost; without it only jobs
accepted during the stall can be lost, and their number is reported (see "Failover:
what can be lost" in docs/operations.md).
``ROTA_LONG=1`` runs the long form (5,000 jobs).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import anyio
import pytest
import redis

from rota import Client, JobSpec, NotReplicated
from tests.chaos.harness import Audit, Fleet, Ledger, durations, poll, report
from tests.topology_servers import SentinelGroup

pytestmark = pytest.mark.topology

LONG = os.environ.get("ROTA_LONG") == "1"
JOBS = 5000 if LONG else 800
BATCH = 10
STALL = 0.5


class Producer(threading.Thread):
    """Enqueues ``JOBS`` work jobs in batches of ``BATCH``, each batch sent again
    (same ids: nothing is enqueued twice) until it is accepted."""

    def __init__(self, url: str, namespace: str, durable: int) -> None:
        super().__init__(daemon=True)
        self.url, self.namespace, self.durable = url, namespace, durable
        self.accepted: list[str] = []
        self.retries = 0
        self.not_replicated = 0
        self.error: BaseException | None = None
        self.stop = False

    def run(self) -> None:
        try:
            anyio.run(self._produce)
        except BaseException as exc:
            self.error = exc

    async def _produce(self) -> None:
        ms = durations(JOBS, 5, 25)
        # socket_timeout above durable_timeout (2 s): a slow WAIT is NotReplicated, not a
        # lost connection
        async with Client.from_url(self.url, self.namespace, socket_timeout=3) as client:
            for i in range(0, JOBS, BATCH):
                specs = [
                    JobSpec(name="work", kwargs={"ms": m}, job_id=uuid.uuid4().hex)
                    for m in ms[i : i + BATCH]
                ]
                while not self.stop:
                    try:
                        await client.enqueue_many(specs, durable=self.durable)
                    except NotReplicated:
                        self.not_replicated += 1
                    except (redis.RedisError, OSError):
                        self.retries += 1
                    else:
                        self.accepted += [s.job_id for s in specs if s.job_id]
                        break
                    await anyio.sleep(0.1)
                await anyio.sleep(0.02)


def _processed(group: SentinelGroup, namespace: str) -> int:
    try:
        with group.primary().client(socket_timeout=1) as r:
            return int(r.hget("{" + namespace + "}:stats", "processed") or 0)
    except (redis.RedisError, StopIteration):
        return -1


def _descent(r: redis.Redis, lineage: str) -> str:
    """Whether the new primary's data set is the old primary's, carried on (a promoted
    replica keeps its primary's replication id as its second one), or was replaced by a
    full sync since (a lost data set, not lost writes)."""
    info = r.info("replication")
    kept = info.get("master_replid2") == lineage
    return (
        f"the new primary ({info.get('role')}) "
        + ("carries the old primary's data set on" if kept else "holds a data set synced anew")
        + f" (old replid {lineage}, now {info.get('master_replid')} / {info.get('master_replid2')})"
    )


@pytest.mark.timeout(600 if LONG else 150)
@pytest.mark.parametrize("durable", [1, 0], ids=["durable", "plain"])
def test_primary_killed_pools_follow_the_new_primary(
    sentinel_group: SentinelGroup, fleet: Fleet, ledger: Ledger, namespace: str, durable: int
) -> None:
    group = sentinel_group
    url = group.url
    workers = [fleet.start(url, namespace, concurrency=10) for _ in range(2)]
    with group.primary().client(socket_timeout=2) as first:
        poll(
            lambda: first.zcard("{" + namespace + "}:pools") == 2,
            within=30,
            what="both pools started",
            details=fleet.tails,
        )
    producer = Producer(url, namespace, durable)
    producer.start()
    poll(
        lambda: len(producer.accepted) >= JOBS // 3 and _processed(group, namespace) > 0,
        within=60,
        what="a third of the jobs accepted",
        details=fleet.tails,
    )
    old = group.primary()
    with old.client(socket_timeout=2) as r:
        lineage = str(r.info("replication")["master_replid"])
    stalled = next(s for s in group.servers if s is not old)
    accepted_at_stall = len(producer.accepted)
    os.kill(stalled.pid or 0, signal.SIGSTOP)
    try:
        with old.client(socket_timeout=2) as r:  # the replication link breaks
            r.execute_command("CLIENT", "KILL", "TYPE", "replica")
        time.sleep(STALL)
        old.kill()
    finally:
        os.kill(stalled.pid or 0, signal.SIGCONT)
    killed = time.monotonic()
    accepted_at_kill = len(producer.accepted)
    new = group.wait_failover(old)
    failover_s = time.monotonic() - killed
    group.rejoin(old, new)
    promoted_ms = int(time.time() * 1000)
    with new.client(socket_timeout=2) as r:

        def beating() -> bool:  # both pools' heartbeats reach the new primary
            beats = r.zrange("{" + namespace + "}:pools", 0, -1, withscores=True)
            return sum(1 for _, score in beats if score > promoted_ms) == 2

        poll(beating, within=15, what="the pools beating on the new primary", details=fleet.tails)
        followed_s = time.monotonic() - killed
        producer.join(timeout=120)
        assert not producer.is_alive(), f"jobs not accepted: {producer.__dict__}"
        assert producer.error is None, repr(producer.error)
        ids = producer.accepted
        assert len(ids) == JOBS

        def settled() -> bool:
            p = "{" + namespace + "}:"
            busy = r.llen(p + "queue:work") + r.zcard(p + "running:work") + r.zcard(p + "retry")
            return bool(busy == 0)

        poll(settled, within=240 if LONG else 90, what="every job run", details=fleet.tails)
        assert [w for w in workers if not w.alive] == [], f"a pool exited\n{fleet.tails()}"
        fleet.close()
        audit = Audit.of(r, namespace, ledger, ids)
        figures = {
            "jobs": JOBS,
            "processes": len(workers),
            "durable": durable,
            "accepted_during_stall": accepted_at_kill - accepted_at_stall,
            "failover_s": round(failover_s, 1),
            "pools_followed_s": round(followed_s, 1),
            "lost": len(audit.lost),
            "duplicate_runs": audit.duplicate_runs,
            "enqueue_retries": producer.retries,
            "not_replicated": producer.not_replicated,
        }
        report("sentinel_failover", figures)
        if durable:
            assert audit.lost == [], (
                f"{_descent(r, lineage)}\n{group.events()}\n{audit.explain(audit.lost, fleet)}"
            )
        else:  # only what the old primary acknowledged while the replica was behind
            window = set(ids[accepted_at_stall:accepted_at_kill])
            assert set(audit.lost) <= window, f"{figures}\n{group.events()}"
