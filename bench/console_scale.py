"""The console's orders and windows at scale: a private redis-server with ``--names``
job names (one queued job each, every tenth with 20) and ``--scheduled`` jobs due a
second apart, then each page over HTTP, the median of ``--reps`` loads after a warm-up:
``/queues`` in each order, and a job set's page with and without a window.

    python -m bench.console_scale [--names 5000] [--scheduled 20000] [--reps 3]
"""

from __future__ import annotations

import argparse
import sys

import anyio

from bench import positive_int
from bench.redis_server import RedisServer
from bench.web_scale import _measure, _Server
from rota import Client, JobSpec, Settings
from rota.web import create_app

NS = "console"
#: When the scheduled jobs are due: 2033, so that none comes due during a run.
BASE = 2_000_000_000


async def _fill(url: str, names: int, scheduled: int) -> None:
    client = Client.from_url(url, NS)
    specs = [
        JobSpec(name=f"job_{i:05d}", args=(i,))
        for i in range(names)
        for _ in range(20 if i % 10 == 0 else 1)
    ]
    specs += [JobSpec(name="later", args=(j,), run_at=BASE + j) for j in range(scheduled)]
    for k in range(0, len(specs), 1000):
        await client.enqueue_many(specs[k : k + 1000])
    await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console_scale", description=__doc__)
    parser.add_argument("--names", type=positive_int, default=5000)
    parser.add_argument("--scheduled", type=positive_int, default=20_000)
    parser.add_argument("--reps", type=positive_int, default=3)
    args = parser.parse_args(argv)
    middle = (BASE + args.scheduled // 2) * 1000
    paths = [
        *(f"/queues?order={by}" for by in ("busy", "name", "size", "running", "latency")),
        "/scheduled?offset=10000",
        "/scheduled?order=newest&offset=10000",
        f"/scheduled?since={middle}&offset=5000",
        f"/api/scheduled?order=newest&until={middle}&limit=500",
    ]
    with RedisServer() as server:
        anyio.run(_fill, server.url, args.names, args.scheduled)
        app = create_app(Settings(redis_url=server.url, namespace=NS))
        with _Server(app) as web:
            rows = _measure(web.url, paths, args.reps)
    sys.stdout.write(f"{'page':<44} {'status':>6} {'ms':>8} {'KB':>8}\n")
    for path, status, ms, size in rows:
        sys.stdout.write(f"{path[:44]:<44} {status:>6} {ms:>8.1f} {size / 1000:>8.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
