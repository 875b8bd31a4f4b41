"""What a debounced enqueue costs beside a plain one, in one run.

``python -m bench.debounce_cost [--jobs N] [--reps R]`` starts a private redis-server and,
R times in turn (the kinds interleaved, so that the host's drift touches each alike),
enqueues N jobs one ``await`` at a time of each kind:

- ``plain``: ``client.enqueue("noop", i)``, and ``client.enqueue_in(60, ...)`` (a
  scheduled job, what a debounced enqueue makes);
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
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import rota
from bench import positive_int
from bench.redis_server import RedisServer
from rota.client.debounce import Mode

WARM_UP = 300

Enqueue = Callable[[rota.Client, int], Awaitable[rota.Enqueued]]


def _debounced(key: Callable[[int], str], mode: Mode) -> Enqueue:
    return lambda c, i: c.enqueue("noop", i, debounce=rota.Debounce(key(i), 60, mode))


#: Each kind: its label, and its i-th enqueue.
KINDS: list[tuple[str, Enqueue]] = [
    ("plain", lambda c, i: c.enqueue("noop", i)),
    ("plain, scheduled (enqueue_in 60 s)", lambda c, i: c.enqueue_in(60, "noop", i)),
    ("debounced, new key", _debounced(lambda i: f"k{i}", "extend")),
    ("debounced, absorbed (first)", _debounced(lambda i: "one", "first")),
    ("debounced, absorbed (extend)", _debounced(lambda i: "one", "extend")),
    ("debounced, absorbed (replace)", _debounced(lambda i: "one", "replace")),
]


async def _stats(client: rota.Client) -> tuple[int, int, int]:
    """FCALL calls and µs, and the calls of every other command, so far."""
    stats: dict[str, Any] = await client.admin.shards[0].redis.info("commandstats")
    rows = {k.removeprefix("cmdstat_"): v for k, v in stats.items() if k.startswith("cmdstat_")}
    fcall = rows.get("fcall", {"calls": 0, "usec": 0})
    others = sum(int(v["calls"]) for k, v in rows.items() if k not in ("fcall", "info"))
    return int(fcall["calls"]), int(fcall["usec"]), others


Row = tuple[float, float, float]  # client µs, Redis µs and other commands, per call


async def _measure(url: str, n: int, enqueue: Enqueue) -> Row:
    async with rota.Client.from_url(url, "bench") as client:
        redis = client.admin.shards[0].redis
        await redis.flushall()
        for i in range(WARM_UP):
            await enqueue(client, -1 - i)
        await redis.flushall()
        await redis.config_resetstat()
        before = await _stats(client)
        started = time.perf_counter()
        for i in range(n):
            await enqueue(client, i)
        elapsed = time.perf_counter() - started
        after = await _stats(client)
    calls = max(1, after[0] - before[0])
    return (
        elapsed / n * 1e6,
        (after[1] - before[1]) / calls,
        (after[2] - before[2]) / calls,
    )


async def _run(url: str, n: int, reps: int) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {label: [] for label, _ in KINDS}
    for _ in range(reps):
        for label, enqueue in KINDS:
            out[label].append(await _measure(url, n, enqueue))
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
    out = sys.stdout.write
    out(f"{args.jobs:,} enqueues one at a time per kind, median of {args.reps} runs\n")
    out("| kind | client µs/call | vs plain | Redis µs/call | vs plain | commands/call |\n")
    out("|---|---:|---:|---:|---:|---:|\n")
    for label, rows in results.items():
        client_us = statistics.median(r[0] for r in rows)
        redis_us = statistics.median(r[1] for r in rows)
        commands = statistics.median(r[2] for r in rows)
        out(
            f"| {label} | {client_us:.1f} | {client_us / plain:.2f}x | {redis_us:.1f}"
            f" | {redis_us / plain_redis:.2f}x | {commands:.1f} |\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
