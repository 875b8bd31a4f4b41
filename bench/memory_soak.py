"""Does Redis's memory level off under sustained load? A soak at full speed.

``python -m bench.memory_soak [--seconds S] [--result none|value] [--short]`` starts a
private redis-server, an in-process ``rota.WorkerPool`` (concurrency 100) and a
producer in the same process that keeps about ``--backlog`` jobs queued with
``enqueue_many`` calls of 1,000, for S seconds (180 by default; ``--short``: 20). The
jobs return None (``--result none``) or a small JSON value (``--result value``).

Every second it samples ``used_memory`` and the jobs completed, and prints every tenth
sample; at the end, the memory at each quarter of the run, the growth over its last
half (bytes a second, and per job completed meanwhile), the jobs kept in
``{ns}:complete`` and what the arithmetic of docs/operations.md predicts.

The pool runs with the defaults (``keep_result`` 1 h, ``keep_none`` 60 s,
``complete_max_count`` 100,000) unless ``--keep-result``, ``--keep-none`` or ``--cap``
say otherwise: memory then levels off once 100,000 jobs are kept, after 15-30 s on a
2-CPU machine (``--keep-none 0`` with ``--result none``: at once, nothing is kept).
Settings this version of rota lacks are left out, so the same command measures an
older rota (``PYTHONPATH=<its src>``) for comparison.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
from redis.asyncio import Redis

import rota
from bench import positive_int
from bench.redis_server import RedisServer
from rota.logging import configure_logging

__all__ = ["Sample", "main"]


@dataclass(frozen=True)
class Sample:
    t: float
    used: int
    done: int
    queued: int


def _settings(url: str, namespace: str, args: argparse.Namespace) -> rota.Settings:
    wanted: dict[str, Any] = {
        "redis_url": url,
        "namespace": namespace,
        "concurrency": 100,
        "log_level": "warning",
    }
    if args.keep_result is not None:
        wanted["keep_result"] = args.keep_result
    if args.keep_none is not None:
        wanted["keep_none"] = args.keep_none
    if args.cap is not None:
        wanted["complete_max_count"] = args.cap
    known = {f.name for f in msgspec.structs.fields(rota.Settings)}
    return rota.Settings(**{k: v for k, v in wanted.items() if k in known})


async def _soak(url: str, args: argparse.Namespace) -> tuple[list[Sample], rota.Settings, int]:
    namespace = "soak-" + uuid.uuid4().hex[:8]
    settings = _settings(url, namespace, args)
    pool = rota.WorkerPool(settings=settings)
    value = args.result == "value"

    @pool.job(name="soak")
    async def soak(i: int) -> dict[str, int] | None:
        return {"i": i, "ok": 1} if value else None

    samples: list[Sample] = []
    r = Redis.from_url(url)
    enqueued = 0
    try:
        async with rota.Client.from_url(url, namespace) as client, pool.running(url):
            stop = time.monotonic() + args.seconds
            start = time.monotonic()

            async def produce() -> None:
                nonlocal enqueued
                while time.monotonic() < stop:
                    if await r.llen(client.admin.shards[0].keys.queue("soak")) > args.backlog:
                        await anyio.sleep(0.005)
                        continue
                    specs = [rota.JobSpec(name="soak", args=(enqueued + i,)) for i in range(1000)]
                    await client.enqueue_many(specs)
                    enqueued += len(specs)

            async def sample() -> None:
                next_at = start
                while time.monotonic() < stop:
                    next_at += 1.0
                    await anyio.sleep(max(0.0, next_at - time.monotonic()))
                    memory = await r.info("memory")
                    stats = await client.admin.stats()
                    queued = await r.llen(client.admin.shards[0].keys.queue("soak"))
                    s = Sample(
                        time.monotonic() - start,
                        int(memory["used_memory"]),
                        int(stats.get("processed", 0)),
                        int(queued),
                    )
                    samples.append(s)
                    if len(samples) % 10 == 0:
                        sys.stdout.write(
                            f"{s.t:6.0f} s  used_memory {s.used / 2**20:8.1f} MiB"
                            f"  completed {s.done:>9,}  queued {s.queued:>6,}\n"
                        )
                        sys.stdout.flush()

            async with anyio.create_task_group() as tg:
                tg.start_soon(produce)
                tg.start_soon(sample)
            await client.admin.pause("soak")
            kept = int(await r.zcard(client.admin.shards[0].keys.prefix + "complete"))
    finally:
        await r.aclose()
    return samples, settings, kept


def _report(samples: list[Sample], settings: rota.Settings, kept: int, result: str) -> str:
    n = len(samples)
    last = samples[-1]
    half = samples[n // 2]
    rate = (last.done - samples[0].done) / max(last.t - samples[0].t, 1e-9)
    growth = (last.used - half.used) / max(last.t - half.t, 1e-9)
    per_job = (last.used - half.used) / max(last.done - half.done, 1)
    quarters = [samples[max(0, (n * q) // 4 - 1)] for q in (1, 2, 3, 4)]
    per_second = statistics.median(b.done - a.done for a, b in itertools.pairwise(samples))
    cap = getattr(settings, "complete_max_count", None)
    keep_none = getattr(settings, "keep_none", None)
    lines = [
        "",
        f"rota {rota.__version__}, result {result}, keep_result {settings.keep_result:g} s,"
        f" keep_none {keep_none if keep_none is not None else '(no such setting)'},"
        f" complete_max_count {cap if cap is not None else '(no such setting)'}",
        f"{last.done:,} jobs completed in {last.t:.0f} s: {rate:,.0f} jobs/s"
        f" (median of the per-second rates"
        f" {per_second:,.0f})",
        "used_memory at each quarter: "
        + ", ".join(f"{s.t:.0f} s {s.used / 2**20:.1f} MiB" for s in quarters),
        f"growth over the last half: {growth / 2**10:,.1f} KiB/s, {per_job:.1f} bytes per job"
        f" completed meanwhile",
        f"complete jobs kept ({{ns}}:complete): {kept:,}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_soak", description=__doc__)
    parser.add_argument("--seconds", type=positive_int, default=180)
    parser.add_argument("--short", action="store_true", help="20 s instead of --seconds")
    parser.add_argument("--result", choices=("none", "value"), default="none")
    parser.add_argument("--backlog", type=positive_int, default=20_000)
    parser.add_argument("--keep-result", type=float)
    parser.add_argument("--keep-none", type=float)
    parser.add_argument("--cap", type=positive_int, help="complete_max_count")
    args = parser.parse_args(argv)
    if args.short:
        args.seconds = 20
    with RedisServer() as server:
        samples, settings, kept = anyio.run(_soak, server.url, args)
    if len(samples) < 4:
        sys.stdout.write("too short a run to judge\n")
        return 1
    sys.stdout.write(_report(samples, settings, kept, args.result))
    return 0


if __name__ == "__main__":
    configure_logging(level="warning")
    raise SystemExit(main())
