"""One pool's throughput on a 3-primary cluster against one standalone server.

``.venv/bin/python -m bench.topology [--jobs N] [--reps R]`` enqueues N noop jobs into
the namespace ``bench``, starts one ``rota worker bench.systems.rota_app:pool -c 100``
and measures jobs per second while it drains them (from 10 % to 90 % done), on a
standalone redis-server and on a cluster of three primaries (no replicas) made by
``redis-cli --cluster create``, alternating, R times each. The namespace is one slot, so
the cluster run talks to one primary: the ratio shows what cluster mode costs that node
(slot checks, the cluster bus) and what the connection code costs rota. The servers come
from the test fixtures (``tests/redis_server.py``, ``tests/topology_servers.py``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import redis
from redis.crc import key_slot
from tests.redis_server import RedisServer
from tests.topology_servers import ClusterGroup

from rota import Client, JobSpec

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
WORKER = (sys.executable, "-m", "rota", "worker", "bench.systems.rota_app:pool", "-c", "100")


def _enqueue(url: str, n: int) -> None:
    async def run() -> None:
        async with Client.from_url(url, NAMESPACE) as client:
            for i in range(0, n, 1000):
                specs = [JobSpec(name="noop", args=(time.time(),)) for _ in range(min(1000, n - i))]
                await client.enqueue_many(specs)

    anyio.run(run)


def measure(url: str, reader: Callable[[], redis.Redis], n: int) -> float:
    """Jobs per second of one pool draining ``n`` noop jobs."""
    _enqueue(url, n)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "BENCH_"))}
    worker = subprocess.Popen(
        [*WORKER, "--redis-url", url],
        cwd=REPO,
        env={**env, "ROTA_LOG_LEVEL": "warning"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marks: dict[float, float] = {}
    try:
        with reader() as r:
            deadline = time.monotonic() + 300
            while len(marks) < 2 and time.monotonic() < deadline:
                done = int(r.hget("{" + NAMESPACE + "}:stats", "processed") or 0)
                for share in (0.1, 0.9):
                    if share not in marks and done >= share * n:
                        marks[share] = time.monotonic()
                time.sleep(0.005)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    return 0.8 * n / (marks[0.9] - marks[0.1])


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topology", description=__doc__)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    slot = key_slot(("{" + NAMESPACE + "}:").encode())
    standalone, cluster = [], []
    with RedisServer() as server, ClusterGroup(replicas=0) as group:
        owner = group.owner(slot)
        for _ in range(args.reps):
            server.client().flushall()
            standalone.append(measure(server.url, server.client, args.jobs))
            owner.client().flushall()
            cluster.append(measure(group.url, owner.client, args.jobs))
    a, b = statistics.median(standalone), statistics.median(cluster)
    print(f"standalone: {[round(x) for x in standalone]} jobs/s, median {a:.0f}")  # noqa: T201
    print(f"cluster:    {[round(x) for x in cluster]} jobs/s, median {b:.0f}")  # noqa: T201
    print(f"cluster / standalone: {b / a:.2f}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
