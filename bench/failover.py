"""How soon a pool works on a new primary: the figure behind docs/operations.md's
Sentinel and Redis Cluster sections.

``.venv/bin/python -m bench.failover [--reps R] [--kind KIND ...]`` starts one ``rota
worker`` (the chaos suite's app, ten workers) against a fresh topology, fails the
primary over, enqueues a job on the new primary the moment the new primary is known, and
reads when that job started (its record's ``started_at``). Three kinds:

- ``sentinel-kill``: the primary killed with SIGKILL (a primary, a replica, three
  sentinels with ``down-after-milliseconds 1000``);
- ``sentinel-planned``: ``SENTINEL FAILOVER``, the old primary still up;
- ``cluster-kill``: the primary that owns the namespace's slot killed with SIGKILL (three
  primaries, three replicas, ``cluster-node-timeout 2000``).

Under Sentinel the moment is the sentinels' ``+switch-master`` (when a client can know);
the replica's own promotion, which comes 0.3-1 s before it, is printed too. Under Cluster
the moment is the replica reporting ``role:master``. The servers come from the test
fixtures (``tests/topology_servers.py``), the worker from the chaos harness.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import anyio
import redis
from redis.crc import key_slot
from tests.chaos.harness import Fleet, Ledger, poll
from tests.redis_server import RedisServer
from tests.topology_servers import SERVICE, ClusterGroup, SentinelGroup

from rota import Client

KINDS = ("sentinel-kill", "sentinel-planned", "cluster-kill")


def _started_after(server: RedisServer, namespace: str, fleet: Fleet, moment: float) -> float:
    """Enqueue a job on ``server`` now; ms from ``moment`` to the job's start."""
    job_id = uuid.uuid4().hex

    async def enqueue() -> None:
        async with Client.from_url(f"redis://127.0.0.1:{server.port}", namespace) as client:
            await client.enqueue("work", 1, job_id=job_id)

    anyio.run(enqueue)
    key = "{" + namespace + "}:job:" + job_id
    with server.client(socket_timeout=2) as r:
        poll(lambda: r.hget(key, "started_at") is not None, 30, "the job started", fleet.tails)
        return int(r.hget(key, "started_at") or 0) - moment * 1000


def _registered(server: RedisServer, namespace: str, fleet: Fleet) -> None:
    with server.client(socket_timeout=2) as r:
        poll(lambda: r.zcard("{" + namespace + "}:pools") == 1, 30, "the pool", fleet.tails)


def sentinel(planned: bool, tmp: Path) -> tuple[float, float]:
    """(ms from +switch-master, ms from the replica's promotion) to the job's start."""
    namespace = "b" + uuid.uuid4().hex[:8]
    with SentinelGroup() as group:
        fleet = Fleet(tmp, Ledger(tmp / f"{namespace}.ledger"))
        try:
            fleet.start(group.url, namespace, concurrency=10)
            old = group.primary()
            new = next(s for s in group.servers if s is not old)
            _registered(old, namespace, fleet)
            promoted: list[float] = []

            def watch_role() -> None:
                with new.client(socket_timeout=2) as r:
                    while r.info("replication")["role"] != "master":
                        time.sleep(0.002)
                promoted.append(time.time())

            threading.Thread(target=watch_role, daemon=True).start()
            with redis.Redis(port=group.sentinels[0].port) as s:
                pubsub = s.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe("+switch-master")
                if planned:
                    while True:
                        try:
                            s.execute_command("SENTINEL", "FAILOVER", SERVICE)
                            break
                        except redis.ResponseError as exc:  # NOGOODSLAVE, just started
                            if "NOGOODSLAVE" not in str(exc):
                                raise
                            time.sleep(0.2)
                else:
                    old.kill()
                while pubsub.get_message(timeout=30) is None:
                    pass
                switched = time.time()
                pubsub.close()
            after = _started_after(new, namespace, fleet, switched)
            return after, after + (switched - promoted[0]) * 1000
        finally:
            fleet.close()


def cluster(tmp: Path) -> tuple[float, float]:
    """(ms from the replica's promotion to the job's start, the same)."""
    namespace = "b" + uuid.uuid4().hex[:8]
    with ClusterGroup() as group:
        fleet = Fleet(tmp, Ledger(tmp / f"{namespace}.ledger"))
        try:
            fleet.start(group.url, namespace, concurrency=10)
            old = group.owner(key_slot(("{" + namespace + "}:").encode()))
            new = group.replica_of(old)
            _registered(old, namespace, fleet)
            old.kill()
            with new.client(socket_timeout=2) as r:
                while r.info("replication")["role"] != "master":
                    time.sleep(0.002)
            promoted = time.time()
            after = _started_after(new, namespace, fleet, promoted)
            return after, after
        finally:
            fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kind", choices=KINDS, action="append")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rota-failover-") as tmp:
        for kind in options.kind or KINDS:
            runs = []
            for _ in range(options.reps):
                if kind == "cluster-kill":
                    runs.append(cluster(Path(tmp)))
                else:
                    runs.append(sentinel(kind == "sentinel-planned", Path(tmp)))
            announced = [round(a, 1) for a, _ in runs]
            promoted = [round(p, 1) for _, p in runs]
            line = (
                f"{kind}: job started {announced} ms after the new primary was known"
                f" (median {statistics.median(announced):.1f}), {promoted} ms after the"
                " replica took the role"
            )
            print(line)  # noqa: T201


if __name__ == "__main__":
    main()
