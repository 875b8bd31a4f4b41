"""CPU-bound handlers in threads or in child processes, beside short async jobs.

``python -m bench.isolation [--cpu-jobs N] [--cpu-ms MS] [--ticks-per-s R]`` starts a
private redis-server and runs the same workload twice in one run, on one pool each
time: N jobs of a pure-Python handler of about MS ms (:mod:`bench.isolation_jobs`),
enqueued at once, and a steady stream of 1 ms async jobs (R per second) for as long as
the CPU jobs run. The first pass runs the CPU handler as a plain ``def`` (a thread of the
pool), the second with ``isolated=True`` (the pool's child processes, one per core by
default). Printed side by side, per pass:

- the async jobs' start latency (from their enqueue to their handler's start), p50 and p99:
  what a CPU job holding the pool's interpreter lock does to everything else;
- the CPU jobs' throughput (jobs per second, from the enqueue of the first to the end of
  the last), which in threads cannot pass one core.

Each async job carries its enqueue time; the latency is read in its handler, so a clock
step between the two is the only error. ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio

import rota
from bench import isolation_jobs, positive_int
from bench.redis_server import RedisServer
from rota.logging import configure_logging

__all__ = ["main", "measure"]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def measure(
    url: str, *, isolated: bool, cpu_jobs: int, rounds: int, rate: float, namespace: str
) -> dict[str, Any]:
    """One pass: the figures of the async jobs and of the CPU jobs (``rounds`` of
    :func:`bench.isolation_jobs.cpu` each)."""
    settings = rota.Settings(
        redis_url=url, namespace=namespace, concurrency=10, keep_result=0, keep_none=0
    )
    pool = rota.WorkerPool(settings=settings)
    latencies: list[float] = []
    done = anyio.Event()
    cpu_done = 0

    all_started = anyio.Event()
    sent = 0  # async jobs enqueued in the measured window

    @pool.job
    async def tick(at: float) -> None:
        latencies.append(time.time() - at)
        if done.is_set() and len(latencies) >= sent:
            all_started.set()
        await anyio.sleep(0.001)

    pool.job(name="cpu", isolated=isolated, timeout=60)(isolation_jobs.cpu)

    async def counted(ctx: Any, call_next: Any) -> Any:
        nonlocal cpu_done
        result = await call_next()
        if ctx.name == "cpu":
            cpu_done += 1
            if cpu_done == cpu_jobs:
                done.set()
        return result

    pool.middleware(counted)
    async with rota.Client.from_url(url, namespace) as client, pool.running():
        # Warm up: a CPU job each child (or thread), and some ticks.
        await client.enqueue_many([rota.JobSpec(name="cpu", args=(1,)) for _ in range(4)])
        for _ in range(20):
            await client.enqueue("tick", time.time())
            await anyio.sleep(0.005)
        await anyio.sleep(1.0)
        latencies.clear()
        cpu_done -= 4
        begun = time.perf_counter()
        await client.enqueue_many(
            [rota.JobSpec(name="cpu", args=(rounds,)) for _ in range(cpu_jobs)]
        )
        while not done.is_set() or not sent:
            await client.enqueue("tick", time.time())
            sent += 1
            await anyio.sleep(1 / rate)
        if len(latencies) >= sent:
            all_started.set()
        took = time.perf_counter() - begun
        with anyio.move_on_after(10):  # the last async jobs start too
            await all_started.wait()
    ms = [x * 1000 for x in latencies]
    return {
        "path": "isolated" if isolated else "thread",
        "ticks": len(ms),
        "tick_p50_ms": round(_quantile(ms, 0.50), 2),
        "tick_p99_ms": round(_quantile(ms, 0.99), 2),
        "tick_max_ms": round(max(ms), 2) if ms else None,
        "cpu_jobs": cpu_jobs,
        "cpu_seconds": round(took, 2),
        "cpu_jobs_per_s": round(cpu_jobs / took, 2),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    head = "| path | async p50 start (ms) | async p99 start (ms) | async max (ms) | CPU jobs/s |"
    lines = [head, "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['path']} | {r['tick_p50_ms']} | {r['tick_p99_ms']} | {r['tick_max_ms']}"
            f" | {r['cpu_jobs_per_s']} |"
        )
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    rounds = isolation_jobs.calibrate(args.cpu_ms)  # once: both passes do the same work
    with RedisServer() as server:
        for i, isolated in enumerate((False, True)):
            rows.append(
                await measure(
                    server.url,
                    isolated=isolated,
                    cpu_jobs=args.cpu_jobs,
                    rounds=rounds,
                    rate=args.ticks_per_s,
                    namespace=f"bench-isolation-{i}",
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-jobs", type=positive_int, default=40)
    parser.add_argument("--cpu-ms", type=float, default=200.0)
    parser.add_argument("--ticks-per-s", type=float, default=100.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # The pools' warnings to stderr, without a line per job: stdout holds the figures.
    configure_logging(level="warning", stream=sys.stderr)
    rows = anyio.run(_main, args)
    if args.json:
        sys.stdout.write(json.dumps({"cores": os.cpu_count(), "rows": rows}) + "\n")
    else:
        sys.stdout.write(
            f"{args.cpu_jobs} CPU jobs of {args.cpu_ms:g} ms beside"
            f" {args.ticks_per_s:g}/s async jobs of 1 ms; {os.cpu_count()} cores\n"
        )
        sys.stdout.write(_table(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
