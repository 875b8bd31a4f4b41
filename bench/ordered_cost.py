"""What an ordered name costs: its jobs share one shard, the others spread over K.

``python -m bench.ordered_cost [--jobs N] [--reps R] [--shards K] [--concurrency C]``
starts a private redis-server and, R times in turn (the kinds interleaved, so that the
host's drift touches each alike), for each kind:

- enqueues N no-op jobs of one name by ``enqueue_many`` (1,000 a call) into a namespace
  of K shards, the client's enqueue time measured;
- runs one pool of C workers in this process and measures jobs per second while it
  drains them (from 10 % to 90 % of the jobs started).

The kinds: ``spread`` (a plain name: its jobs over the K shards) and ``ordered`` (the
name declared ordered: every job in the shard its name names). All shards are on one
server here, so what the figures show is the pool's side (one shard's fetch loop serves
the ordered name, K serve the spread one) and the client's; in a cluster an ordered
name is also bounded by the one node that holds its shard, which this host cannot show.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import anyio

from bench import positive_int
from bench.redis_server import RedisServer
from rota import Client, JobContext, JobSpec, WorkerPool
from rota.config import Settings
from rota.logging import configure_logging

NAME = "noop"
KINDS = ("spread", "ordered")


async def _measure(
    url: str, kind: str, n: int, shards: int, concurrency: int
) -> tuple[float, float]:
    """Enqueue µs per job, and jobs per second drained, for one kind."""
    ordered = frozenset({NAME}) if kind == "ordered" else frozenset()
    namespace = f"b{time.monotonic_ns()}"
    started: list[float] = []
    done = anyio.Event()
    async with Client.from_url(url, namespace, shards=shards, ordered=ordered) as client:
        t0 = time.perf_counter()
        for i in range(0, n, 1000):
            await client.enqueue_many([JobSpec(name=NAME) for _ in range(min(1000, n - i))])
        enqueue_us = (time.perf_counter() - t0) / n * 1e6
        settings = Settings(
            redis_url=url,
            namespace=namespace,
            shards=shards,
            concurrency=concurrency,
            keep_result=0,
            keep_none=0,
            log_level="warning",
        )
        pool = WorkerPool(settings=settings)

        @pool.job(name=NAME)
        async def noop(ctx: JobContext) -> None:
            started.append(time.perf_counter())
            if len(started) == n:
                done.set()

        async with pool.running():
            with anyio.fail_after(600):
                await done.wait()
        await client.admin.shards[0].redis.flushall()
    first, last = started[int(0.1 * n)], started[int(0.9 * n) - 1]
    return enqueue_us, 0.8 * n / (last - first)


async def _run(url: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    for _ in range(args.reps):
        for kind in KINDS:
            out[kind].append(await _measure(url, kind, args.jobs, args.shards, args.concurrency))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ordered_cost", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--shards", type=positive_int, default=4)
    parser.add_argument("--concurrency", type=positive_int, default=50)
    args = parser.parse_args(argv)
    configure_logging("console", "warning")
    with RedisServer() as server:
        results = anyio.run(_run, server.url, args)
    out = sys.stdout.write
    out(
        f"{args.jobs:,} no-op jobs of one name, K={args.shards}, one pool c={args.concurrency},"
        f" one redis-server, median of {args.reps} runs\n"
    )
    out("| kind | enqueue µs/job | drained jobs/s | vs spread |\n|---|---:|---:|---:|\n")
    spread = statistics.median(r[1] for r in results["spread"])
    for kind, rows in results.items():
        enq = statistics.median(r[0] for r in rows)
        rate = statistics.median(r[1] for r in rows)
        each = ", ".join(f"{r[1]:.0f}" for r in rows)
        out(f"| {kind} | {enq:.1f} | {rate:,.0f} ({each}) | {rate / spread:.2f}x |\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
