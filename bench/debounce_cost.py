"""What a debounced enqueue costs beside a plain one, in one run.

``python -m bench.debounce_cost [--jobs N] [--reps R]`` starts a private redis-server and,
R times in turn (the kinds interleaved, so that the host's drift touches each alike),
enqueues N jobs one ``await`` at a time of each kind:

- ``plain``: ``client.enqueue("noop", i)``;
- ``debounced, new key``: each enqueue a key of its own (it makes the pending job:
  a scheduled job and its debounce key);
- ``debounced, absorbed (first|extend|replace)``: every enqueue the same key, taken in
  by its pending job (kept, its run time moved, its args replaced).

It prints, for each kind, the median over the reps of the client's µs per call, Redis's µs
per call (``INFO commandstats``: the function call, the commands it ran included) and the
commands Redis ran per call besides it. Redis is flushed before each measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import rota
from bench import positive_int
from bench.redis_server import RedisServer

WARM_UP = 300

#: Each kind: its label, and the debounce of its i-th enqueue (None: plain).
KINDS: list[tuple[str, Callable[[int], rota.Debounce | None]]] = [
    ("plain", lambda i: None),
    ("debounced, new key", lambda i: rota.Debounce(f"k{i}", 60, "extend")),
    ("debounced, absorbed (first)", lambda i: rota.Debounce("one", 60, "first")),
    ("debounced, absorbed (extend)", lambda i: rota.Debounce("one", 60, "extend")),
    ("debounced, absorbed (replace)", lambda i: rota.Debounce("one", 60, "replace")),
]


async def _stats(client: rota.Client) -> tuple[int, int, int]:
    """FCALL calls and µs, and the calls of every other command, so far."""
    stats: dict[str, Any] = await client.admin.shards[0].redis.info("commandstats")
    rows = {k.removeprefix("cmdstat_"): v for k, v in stats.items() if k.startswith("cmdstat_")}
    fcall = rows.get("fcall", {"calls": 0, "usec": 0})
    others = sum(int(v["calls"]) for k, v in rows.items() if k not in ("fcall", "info"))
    return int(fcall["calls"]), int(fcall["usec"]), others


async def _measure(url: str, n: int, debounce: Callable[[int], rota.Debounce | None]) -> tuple:
    async with rota.Client.from_url(url, "bench") as client:
        redis = client.admin.shards[0].redis
        await redis.flushall()
        for i in range(WARM_UP):
            await client.enqueue("noop", i, debounce=debounce(-1 - i))
        await redis.flushall()
        await redis.config_resetstat()
        before = await _stats(client)
        started = time.perf_counter()
        for i in range(n):
            await client.enqueue("noop", i, debounce=debounce(i))
        elapsed = time.perf_counter() - started
        after = await _stats(client)
    calls = max(1, after[0] - before[0])
    return (
        elapsed / n * 1e6,
        (after[1] - before[1]) / calls,
        (after[2] - before[2]) / calls,
    )


async def _run(url: str, n: int, reps: int) -> dict[str, list[tuple[float, float, float]]]:
    out: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _ in KINDS}
    for _ in range(reps):
        for label, debounce in KINDS:
            out[label].append(await _measure(url, n, debounce))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.debounce_cost")
    parser.add_argument("--jobs", type=positive_int, default=10_000)
    parser.add_argument("--reps", type=positive_int, default=5)
    args = parser.parse_args(argv)
    with RedisServer() as server:
        results = asyncio.run(_run(server.url, args.jobs, args.reps))
    plain = statistics.median(r[0] for r in results["plain"])
    plain_redis = statistics.median(r[1] for r in results["plain"])
    print(f"{args.jobs:,} enqueues one at a time per kind, median of {args.reps} runs")
    print("| kind | client µs/call | vs plain | Redis µs/call | vs plain | commands/call |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, rows in results.items():
        client_us = statistics.median(r[0] for r in rows)
        redis_us = statistics.median(r[1] for r in rows)
        commands = statistics.median(r[2] for r in rows)
        print(
            f"| {label} | {client_us:.1f} | {client_us / plain:.2f}x | {redis_us:.1f}"
            f" | {redis_us / plain_redis:.2f}x | {commands:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
