"""Enqueue cost per call: rota's pipelined link against the redis-py path it replaced.

``python -m bench.enqueue_one [--jobs N] [--path link|redis-py|both] [--loop uvloop|asyncio]``
starts a private redis-server and times, for each path, N calls of ``client.enqueue`` one
``await`` at a time, N with 64 in flight, and N jobs through ``enqueue_many`` 20 and 1,000
at a time; it prints jobs/s and µs per call. The ``redis-py`` path is the client with its
link removed: the same ``EVALSHA`` calls through redis-py's connection pool and pipelines,
as the client sent them before :mod:`rota.wire.link`. Redis is flushed before each
measurement, and 500 enqueues warm each client up first.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis

import rota
from bench import positive_int
from bench.redis_server import RedisServer
from rota.protocol.render import library
from rota.wire.conn import RedisPyConn

IN_FLIGHT = 64
WARM_UP = 500


async def _one(client: rota.Client, n: int) -> tuple[int, int]:
    for _ in range(n):
        await client.enqueue("noop", time.time())
    return n, n


async def _in_flight(client: rota.Client, n: int) -> tuple[int, int]:
    async def lane(count: int) -> None:
        for _ in range(count):
            await client.enqueue("noop", time.time())

    await asyncio.gather(*(lane(n // IN_FLIGHT + (i < n % IN_FLIGHT)) for i in range(IN_FLIGHT)))
    return n, n


def _many(size: int) -> Callable[[rota.Client, int], Awaitable[tuple[int, int]]]:
    async def run(client: rota.Client, n: int) -> tuple[int, int]:
        for _ in range(n // size):
            await client.enqueue_many([rota.JobSpec(name="noop", args=(time.time(),))] * size)
        return n // size, n // size * size

    return run


#: Each mode returns (calls, jobs enqueued).
MODES: list[tuple[str, Callable[[rota.Client, int], Awaitable[tuple[int, int]]]]] = [
    ("one at a time", _one),
    (f"{IN_FLIGHT} in flight", _in_flight),
    ("many, 20 a call", _many(20)),
    ("many, 1,000 a call", _many(1000)),
]


async def _measure(url: str, path: str, n: int) -> list[tuple[str, float, int, int]]:
    rows = []
    for mode, run in MODES:
        async with rota.Client.from_url(url, "bench") as client:
            if path == "redis-py":
                shard = client.admin.shards[0]
                shard.conn = RedisPyConn(shard.redis)  # through redis-py's pool
                shard.hot = shard.scope.on(shard.conn)
            await client.admin.shards[0].redis.flushall()
            await _one(client, WARM_UP)
            started = time.perf_counter()
            calls, jobs = await run(client, n)
            rows.append((mode, time.perf_counter() - started, calls, jobs))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.enqueue_one")
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    parser.add_argument("--path", choices=["link", "redis-py", "both"], default="both")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args(argv)
    runner: Any = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        runner = uvloop.run
    paths = ["redis-py", "link"] if args.path == "both" else [args.path]
    with RedisServer() as server:
        wire = _wire(server.port, args.jobs)
        script_wire = _wire_script(server.port, args.jobs)
        for path in paths:
            for mode, elapsed, calls, jobs in runner(_measure(server.url, path, args.jobs)):
                if not calls:
                    sys.stdout.write(f"{path:>8}  {mode:<18} skipped: fewer jobs than a call\n")
                    continue
                sys.stdout.write(
                    f"{path:>8}  {mode:<18} {jobs / elapsed:>9,.0f} jobs/s"
                    f"  {elapsed / calls * 1e6:8.1f} µs/call"
                    + (f"  ({jobs / elapsed / wire:.0%} of the wire)" if wire else "")
                    + "\n"
                )
        if wire:
            sys.stdout.write(
                f"    wire  redis-benchmark -c 1 LPUSH {wire:>9,.0f} requests/s (the same server,"
                " one connection, one request at a time)\n"
            )
        if wire and script_wire:
            sys.stdout.write(
                f"    wire  redis-benchmark -c 1 FCALL enqueue {script_wire:>9,.0f} requests/s"
                f" ({script_wire / wire:.0%} of the wire: the enqueue script from C, the most"
                " any client of it reaches)\n"
            )
    return 0


def _one_at_a_time(port: int, n: int, command: list[str]) -> float:
    """Requests a second of ``redis-benchmark -c 1`` (one connection, one request at a
    time) running ``command`` n times; 0 when redis-benchmark is not installed (Debian:
    redis-tools)."""
    tool = shutil.which("redis-benchmark")
    if tool is None:
        return 0.0
    head = [tool, "-p", str(port), "-c", "1", "-n", str(n), "-r", "1000000000", "--csv"]
    done = subprocess.run(head + command, capture_output=True, text=True, check=True)
    last = next(csv.reader([done.stdout.strip().splitlines()[-1]]))  # command, rps, ...
    return float(last[1])


def _wire(port: int, n: int) -> float:
    """What one connection does with one LPUSH at a time: the round trip of this
    machine's loopback and Redis with nothing of rota in it."""
    return _one_at_a_time(port, n, ["LPUSH", "{wire}:list", "1"])


def _wire_script(port: int, n: int) -> float:
    """What one connection does with one call of the enqueue function at a time, from
    C (a new random id each call): the ceiling of any client that enqueues by the
    script, rota's included. 0 without FCALL (Redis 6.2)."""
    lib = library()
    try:
        with redis.Redis(port=port) as r:
            r.function_load(lib.code, replace=True)
    except redis.ResponseError:
        return 0.0
    call = ["FCALL", lib.function("enqueue"), "1", "{wire}:", "__rand_int__", "noop", "[0]"]
    return _one_at_a_time(port, n, [*call, str(int(time.time() * 1000))])  # as rota sends it


if __name__ == "__main__":
    raise SystemExit(main())
