"""How long one script call blocks Redis, by how many jobs it carries.

``python -m bench.call_sizes [--jobs N]`` starts a private redis-server with SLOWLOG
logging every call, and times single calls of ``enqueue_batch`` (the calls of
``enqueue_many``), ``promote`` (the scheduler's), and ``fetch`` and ``finish`` (a pool's),
at several sizes, with nothing else running. It prints the median and the longest call
of each size. Redis runs one command at a time, so a call of 20 ms holds every other
client of the shard (every producer, every pool's fetch) for 20 ms: rota sizes its calls
from these figures (see ``BATCH`` in rota.protocol.calls, ``_LIMIT`` in rota.worker.scheduler,
``_MAX_BATCH`` in rota.worker.acker and the ``fetch_batch`` setting).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
from redis.asyncio import Redis

import rota
import rota.protocol.calls
from bench import positive_int
from bench.redis_server import RedisServer
from rota.protocol.rows import Fetched
from rota.protocol.scripts import script

__all__ = ["main"]


async def _calls(r: Redis) -> list[int]:
    """The durations (µs) of the script calls SLOWLOG holds, and empty it."""
    out = []
    for entry in await r.slowlog_get(100_000):
        command = entry["command"]
        head = command[:8] if isinstance(command, bytes) else str(command)[:8].encode()
        if head.upper().startswith((b"FCALL", b"EVALSHA")):
            out.append(int(entry["duration"]))
    await r.slowlog_reset()
    return out


def _line(label: str, durations: list[int]) -> str:
    median, longest = statistics.median(durations) / 1000, max(durations) / 1000
    return (
        f"{label:<28} {len(durations):>5} calls  median {median:6.2f} ms  longest {longest:6.2f} ms"
    )


async def _enqueue_batch(r: Redis, url: str, jobs: int, size: int) -> list[int]:
    async with rota.Client.from_url(url, f"batch{size}") as client:
        await client.enqueue("warm")
        rota.protocol.calls.BATCH = size  # the size under test
        await r.slowlog_reset()
        await client.enqueue_many([rota.JobSpec(name="noop", args=(i,)) for i in range(jobs)])
        return await _calls(r)


async def _promote(r: Redis, url: str, jobs: int, size: int) -> list[int]:
    async with rota.Client.from_url(url, f"promote{size}") as client:
        due = [rota.JobSpec(name="later", args=(i,), delay=0.2) for i in range(jobs)]
        await client.enqueue_many(due)
        await anyio.sleep(0.3)
        await r.slowlog_reset()
        while True:
            now = int(time.time() * 1000)
            moved, *_ = await script("promote")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                [now, size],
                client.admin.shards[0].script_mode,
            )
            if int(moved) < size:
                return await _calls(r)


async def _fetch_finish(r: Redis, url: str, jobs: int, size: int) -> tuple[list[int], list[int]]:
    async with rota.Client.from_url(url, f"fetch{size}") as client:
        await client.enqueue_many([rota.JobSpec(name="noop", args=(i,)) for i in range(jobs)])
        await r.slowlog_reset()
        fetched: list[int] = []
        finished: list[int] = []
        for _ in range(jobs // size):
            now = int(time.time() * 1000)
            args: list[Any] = [now, 30_000, "pool", 1 << 20, size, *["noop"] * size, 0]
            rows, *_ = await script("fetch")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                args,
                client.admin.shards[0].script_mode,
            )
            fetched += await _calls(r)
            # Flat, seven entries per attempt, as a pool's acker sends them.
            outcomes = [
                field
                for job in Fetched.parse(rows)
                for field in (job.id, "noop", job.token, "complete", "", 60_000, "")
            ]
            finish: list[Any] = [now, msgspec.msgpack.encode(outcomes), 100_000]
            await script("finish")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                finish,
                client.admin.shards[0].script_mode,
            )
            finished += await _calls(r)
        return fetched, finished


async def _main(jobs: int) -> None:
    with RedisServer() as server:
        r = Redis.from_url(server.url)
        await r.config_set("slowlog-log-slower-than", 0)
        await r.config_set("slowlog-max-len", 100_000)
        version = (await r.info("server"))["redis_version"]
        lines = [f"redis {version}, {jobs} jobs per size, one call at a time"]
        steps: list[tuple[str, Callable[[int], Awaitable[list[int]]]]] = [
            ("enqueue_batch of", lambda n: _enqueue_batch(r, server.url, jobs, n)),
            ("promote of", lambda n: _promote(r, server.url, jobs, n)),
        ]
        for label, step in steps:
            for size in (1000, 200, 50):
                lines.append(_line(f"{label} {size}", await step(size)))
        for size in (100, 50, 32):
            fetched, finished = await _fetch_finish(r, server.url, min(jobs, 5000), size)
            lines.append(_line(f"fetch of {size}", fetched))
            lines.append(_line(f"finish of {size} (kept 60 s)", finished))
        await r.aclose()
    sys.stdout.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.call_sizes", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    args = parser.parse_args(argv)
    anyio.run(_main, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
