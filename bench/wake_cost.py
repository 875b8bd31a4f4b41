"""What a wake-up costs Redis: commands per job when each job wakes an idle pool.

``python -m bench.wake_cost --cluster --shards 3 12 --jobs 300`` runs one pool (c=10)
over K shards and enqueues no-op jobs one at a time, each once the one before has
finished, so that every job finds the pool waiting on its wake lists: the case the
wake protocol costs most in (a busy pool's enqueues find the lists holding tokens and
neither push nor ring). It counts the commands Redis runs (``INFO commandstats``, the
scripts' inner ones included, every primary's in a cluster), less what the idle pool
costs over the same time (measured just before, for as long), per job. Without
``--cluster``: one private redis-server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid

from bench.idle_cost import Servers
from rota import Client, JobContext, JobSpec, WorkerPool
from rota.config import Settings

__all__ = ["wake_cost"]


async def wake_cost(servers: Servers, shards: int, jobs: int) -> tuple[float, float]:
    """Commands per job (idle cost taken out), and the idle pool's commands a second."""
    namespace = "wake" + uuid.uuid4().hex[:8]
    settings = Settings(
        redis_url=servers.url, namespace=namespace, shards=shards, concurrency=10, keep_result=0
    )
    pool = WorkerPool(settings=settings)
    done = asyncio.Event()

    @pool.job
    async def nothing(ctx: JobContext) -> None:
        done.set()

    async with pool.running(), Client.from_url(servers.url, namespace, shards=shards) as client:
        await asyncio.sleep(2)  # past the start
        before, t0 = servers.calls(), time.monotonic()
        await asyncio.sleep(10)
        idle = (sum(servers.calls().values()) - sum(before.values())) / (time.monotonic() - t0)
        before, t0 = servers.calls(), time.monotonic()
        for _ in range(jobs):
            done.clear()
            await client.enqueue_many([JobSpec(name="nothing")])
            await done.wait()
            await asyncio.sleep(0.01)  # the finish sent, the fetcher waiting again
        spent = sum(servers.calls().values()) - sum(before.values())
        took = time.monotonic() - t0
    return (spent - idle * took) / jobs, idle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wake_cost", description=__doc__)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--cluster", action="store_true", help="three primaries of a cluster")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        servers = Servers.start(stack, cluster=args.cluster)
        for k in args.shards:
            per_job, idle = asyncio.run(wake_cost(servers, k, args.jobs))
            sys.stdout.write(
                f"K={k}: {per_job:.2f} commands per job woken ({idle:.2f} commands/s idle)\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
