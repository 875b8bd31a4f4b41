"""Cluster: three namespaces on three primaries, through a failover and a slot migration.

Three primaries with one replica each. Three namespaces, chosen so that each lives on
another primary, each with a worker pool in its own process started with a
``redis+cluster://`` URL of seed nodes. While they run:

1. the replica of namespace A's primary takes over, by ``CLUSTER FAILOVER`` or because
   the primary is killed with SIGKILL: A's pool finds the new owner of its slot by
   itself;
2. namespace B's slot migrates to C's primary, by the steps ``redis-cli --cluster
   reshard`` takes (``SETSLOT IMPORTING``/``MIGRATING``, ``MIGRATE`` in batches,
   ``SETSLOT NODE``), while B's pool runs jobs (half of them are enqueued once the
   failover is over, however long it took): B's scripts wait while the keys move
   (``ASK``) and its pool follows ``MOVED`` to the new owner. That node's function
   library is flushed first, so B's pool (and C's) must load it there again by
   themselves.

Every job completes, none is lost, no pool exits. ``ROTA_LONG=1``: 5,000 jobs.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
import redis
from redis.crc import key_slot

from rota import Client
from tests.chaos.harness import Audit, Fleet, Ledger, durations, enqueue_work, poll, report
from tests.helpers import link_of
from tests.redis_server import RedisServer
from tests.topology_servers import ClusterGroup

pytestmark = pytest.mark.topology

LONG = os.environ.get("ROTA_LONG") == "1"
PER_NAMESPACE = 1667 if LONG else 400


def _slot(namespace: str) -> int:
    return key_slot(("{" + namespace + "}:").encode())


def _namespaces(cluster: ClusterGroup) -> list[str]:
    """Three fresh namespaces, each served by another primary."""
    chosen: dict[int, str] = {}
    while len(chosen) < 3:
        ns = "c" + uuid.uuid4().hex[:10]
        chosen.setdefault(cluster.owner(_slot(ns)).port, ns)
    return list(chosen.values())


def _processed(cluster: ClusterGroup, namespace: str) -> int:
    try:
        with cluster.owner(_slot(namespace)).client(socket_timeout=1) as r:
            return int(r.hget("{" + namespace + "}:stats", "processed") or 0)
    except (redis.RedisError, RuntimeError):
        return -1


def migrate_slot(cluster: ClusterGroup, slot: int, target: RedisServer) -> int:
    """Move ``slot`` to ``target`` as ``redis-cli --cluster reshard`` does; returns how
    many keys moved."""
    source = cluster.owner(slot)
    src_id, dst_id = cluster.node_id(source), cluster.node_id(target)
    moved = 0
    with source.client(socket_timeout=10) as src, target.client(socket_timeout=10) as dst:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            src.execute_command(
                "MIGRATE", "127.0.0.1", target.port, "", 0, 10000, "REPLACE", "KEYS", *keys
            )
            moved += len(keys)
        for node in (target, source):  # the target first, as redis-cli does
            with node.client(socket_timeout=5) as r:
                r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        for node in cluster.servers:
            if node.running and node not in (target, source):
                with node.client(socket_timeout=5) as r:
                    info = r.info("replication")
                    if info.get("role") == "master":
                        r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    return moved


@pytest.mark.timeout(600 if LONG else 170)
@pytest.mark.parametrize("failover", ["manual", "kill"])
def test_three_namespaces_through_a_failover_and_a_slot_migration(
    cluster_group: ClusterGroup, fleet: Fleet, ledger: Ledger, failover: str
) -> None:
    cluster = cluster_group
    url = cluster.url
    a, b, c = _namespaces(cluster)
    work = {ns: durations(PER_NAMESPACE, 40, 80, seed=i) for i, ns in enumerate((a, b, c))}
    # B's second half is enqueued once the failover is over: however long that took, B's
    # pool still has work while its slot moves.
    later_b = work[b][PER_NAMESPACE // 2 :]
    work[b] = work[b][: PER_NAMESPACE // 2]
    ids = {ns: enqueue_work(url, ns, work[ns]) for ns in (a, b, c)}
    workers = [fleet.start(url, ns, concurrency=5) for ns in (a, b, c)]
    poll(
        lambda: _processed(cluster, a) >= PER_NAMESPACE // 6,
        within=60,
        what="namespace A under way",
        details=fleet.tails,
    )
    # 1. A's primary hands over to its replica, or dies.
    old = cluster.owner(_slot(a))
    replica = cluster.replica_of(old)
    started = time.monotonic()
    if failover == "kill":
        old.kill()
    else:
        with replica.client(socket_timeout=5) as r:
            r.execute_command("CLUSTER", "FAILOVER")
    poll(
        lambda: cluster.owner(_slot(a)).port == replica.port,
        within=30,
        what="the replica taking over A's slot",
    )
    failover_s = time.monotonic() - started
    # 2. B's slot to C's primary, while B's pool runs.
    if failover == "kill":
        poll(cluster.ok, within=30, what="the cluster state ok again")
    ids[b] += enqueue_work(url, b, later_b)
    done_b = _processed(cluster, b)
    assert done_b < PER_NAMESPACE, "B finished before its slot could move: make the run longer"
    started = time.monotonic()
    target = cluster.owner(_slot(c))
    with target.client(socket_timeout=5) as r:
        r.execute_command("FUNCTION", "FLUSH")
    moved_keys = migrate_slot(cluster, _slot(b), target)
    migration_s = time.monotonic() - started
    assert cluster.owner(_slot(b)).port == target.port
    for ns in (a, b, c):

        def done(ns: str = ns) -> bool:
            return _processed(cluster, ns) >= PER_NAMESPACE

        poll(
            done,
            within=240 if LONG else 90,
            what=f"every job of namespace {ns} done",
            details=fleet.tails,
        )
    assert [w for w in workers if not w.alive] == [], f"a pool exited\n{fleet.tails()}"
    with target.client(socket_timeout=5) as r:  # loaded again where B and C now run
        assert r.execute_command("FUNCTION", "LIST")
    fleet.close()
    figures: dict[str, object] = {
        "failover": failover,
        "jobs": 3 * PER_NAMESPACE,
        "failover_s": round(failover_s, 1),
        "migration_s": round(migration_s, 2),
        "migrated_keys": moved_keys,
    }
    for label, ns in (("a", a), ("b", b), ("c", c)):
        with cluster.owner(_slot(ns)).client(socket_timeout=5) as r:
            audit = Audit.of(r, ns, ledger, ids[ns])
        assert audit.lost == [], audit.explain(audit.lost, fleet)
        figures[f"lost_{label}"] = len(audit.lost)
        figures[f"duplicate_runs_{label}"] = audit.duplicate_runs
    report("cluster_failover_and_migration", figures)


@pytest.mark.timeout(60)
async def test_clients_of_three_namespaces_talk_to_three_owners(
    cluster_group: ClusterGroup,
) -> None:
    for ns in _namespaces(cluster_group):
        owner = cluster_group.owner(_slot(ns))
        async with Client.from_url(cluster_group.url, ns) as client:
            job = await client.enqueue("work", ms=1)  # through the Link
            assert (await client.job(job.id)) is not None  # through redis-py's pool
            link = link_of(client)
            assert link is not None and link.port == owner.port
        with owner.client() as r:
            assert r.exists("{" + ns + "}:job:" + job.id)
