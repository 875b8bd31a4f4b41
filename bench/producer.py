"""The producer process: enqueue jobs with one system's client and time it.

``python -m bench.producer SYSTEM MODE N [--jobs noop] [--rate R]`` runs in that system's
virtual environment and prints one JSON line: ``{"n": ..., "elapsed": ...}``.

Modes:
    one         one ``await`` at a time
    concurrent  64 enqueues in flight (64 threads for a synchronous client)
    batch       the system's batch API, 1,000 jobs a call (exit 3 when it has none)
    fill        the fastest of those the system has: batch, else concurrent
    paced       N jobs at R a second, one at a time (latency)
    warm        one job with enqueue time 0, which the runner leaves out

Every job's only argument is its enqueue time (``time.time()`` just before the call).
Standard library only, besides the system's module.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import threading
import time
from typing import Any

IN_FLIGHT = 64
BATCH = 1000
NO_BATCH = 3


def _names(jobs: list[str], n: int) -> list[str]:
    """n job names, interleaved: a, b, c, a, b, c, ..."""
    return [jobs[i % len(jobs)] for i in range(n)]


async def _one(producer: Any, names: list[str]) -> None:
    if getattr(producer, "sync", False):
        for name in names:
            producer.one_sync(name, time.time())
        return
    for name in names:
        await producer.one(name, time.time())


async def _concurrent(producer: Any, names: list[str]) -> None:
    lanes = [names[i::IN_FLIGHT] for i in range(IN_FLIGHT)]
    if getattr(producer, "sync", False):

        def lane_sync(lane: list[str]) -> None:
            for name in lane:
                producer.one_sync(name, time.time())

        threads = [threading.Thread(target=lane_sync, args=(lane,)) for lane in lanes]
        for thread in threads:
            thread.start()
        await asyncio.to_thread(lambda: [thread.join() for thread in threads])
        return

    async def lane(lane: list[str]) -> None:
        for name in lane:
            await producer.one(name, time.time())

    await asyncio.gather(*(lane(part) for part in lanes))


async def _batch(producer: Any, names: list[str]) -> None:
    by_name: dict[str, int] = {}
    for name in names:
        by_name[name] = by_name.get(name, 0) + 1
    for name, count in by_name.items():
        for start in range(0, count, BATCH):
            size = min(BATCH, count - start)
            await producer.many(name, [time.time() for _ in range(size)])


async def _paced(producer: Any, names: list[str], rate: float) -> None:
    t0 = time.monotonic()
    for i, name in enumerate(names):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if getattr(producer, "sync", False):
            producer.one_sync(name, time.time())
        else:
            await producer.one(name, time.time())


async def run(system: str, mode: str, n: int, jobs: list[str], rate: float, url: str) -> int:
    module = importlib.import_module(f"bench.systems.{system}_app")
    producer = module.Producer(url)
    batch = getattr(producer, "batch_api", None)
    if mode == "fill":
        mode = "batch" if batch else "concurrent"
    if mode == "batch" and not batch:
        sys.stdout.write(json.dumps({"error": "no batch API"}) + "\n")
        return NO_BATCH
    names = _names(jobs, n)
    await producer.open()
    try:
        started = time.perf_counter()
        if mode == "one":
            await _one(producer, names)
        elif mode == "concurrent":
            await _concurrent(producer, names)
        elif mode == "batch":
            await _batch(producer, names)
        elif mode == "paced":
            await _paced(producer, names, rate)
        elif mode == "warm":
            if getattr(producer, "sync", False):
                producer.one_sync(jobs[0], 0.0)
            else:
                await producer.one(jobs[0], 0.0)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        elapsed = time.perf_counter() - started
    finally:
        await producer.close()
    result = {"n": n, "elapsed": elapsed, "mode": mode, "batch_api": batch}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.producer")
    parser.add_argument("system")
    parser.add_argument("mode")
    parser.add_argument("n", type=int)
    parser.add_argument("--jobs", default="noop")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--url", required=True)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:
        runner: Any = asyncio.run
    else:
        runner = uvloop.run
    return int(
        runner(run(args.system, args.mode, args.n, args.jobs.split(","), args.rate, args.url))
    )


if __name__ == "__main__":
    sys.exit(main())
