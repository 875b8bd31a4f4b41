"""What the number of job names a pool serves costs, when one of them has work.

``python -m bench.many_names [--names 1,500] [--jobs N] [--concurrency C] [--reps R]``
starts a private redis-server and, R times over, for each count of names K: a pool that
handles K job names (``noop_0`` .. ``noop_<K-1>``, equal priorities) runs N queued noop
jobs of ``noop_0`` alone. The window runs from the resume of that name to the last
outcome recorded (as in :mod:`bench.redis_cost`), and gives jobs/s, Redis commands and
CPU per job. It then leaves the pool idle for ``--idle`` seconds and gives what Redis
ran meanwhile, per second.

The slowest script call: SLOWLOG is reset before each window with a threshold of
``--slow-us`` (1,000 µs); the output gives how many calls went over it and the slowest.

Figures on a shared 2-CPU machine move by 10-20 % between runs; the rounds interleave
the counts of names (1, 500, 1, 500, ...) so that a slow spell hits both.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from dataclasses import dataclass

import anyio
from redis.asyncio import Redis

import rota
from bench import positive_int
from bench.redis_cost import Cost, _namespace, measure
from bench.redis_server import RedisServer
from rota.logging import configure_logging

__all__ = ["Row", "main"]


@dataclass(frozen=True)
class Row:
    names: int
    cost: Cost
    slow_calls: int
    slowest_us: int
    idle_cmds_per_s: float
    idle_cpu_us_per_s: float

    @property
    def rate(self) -> float:
        return self.cost.jobs / self.cost.seconds


def _names_list(text: str) -> list[int]:
    return [positive_int(t) for t in text.split(",") if t]


async def _round(
    r: Redis, url: str, names: int, jobs: int, concurrency: int, idle: float, slow_us: int
) -> Row:
    namespace = _namespace()
    settings = rota.Settings(
        redis_url=url, namespace=namespace, concurrency=concurrency, log_level="warning"
    )
    pool = rota.WorkerPool(settings=settings)
    ran = 0
    all_ran = anyio.Event()

    async def noop(t: float) -> None:
        nonlocal ran
        ran += 1
        if ran == jobs:
            all_ran.set()

    for i in range(names):
        pool.job(name=f"noop_{i}")(noop)
    busy = "noop_0"
    async with rota.Client.from_url(url, namespace) as client:
        await client.admin.pause(busy)
        for i in range(0, jobs, 1000):
            await client.enqueue_many(
                [rota.JobSpec(name=busy, args=(time.time(),))] * min(1000, jobs - i)
            )
        polls = 0

        async def work() -> None:
            nonlocal polls
            await client.admin.resume(busy)
            await all_ran.wait()
            while True:
                polls += 1
                if int(await r.hget(client.admin.shards[0].keys.stats, "processed") or 0) >= jobs:
                    return
                await anyio.sleep(0.005)

        async with pool.running(url):
            await anyio.sleep(0.3)
            cost = await measure(r, f"{names} names", jobs, work, None, slow_us)

            async def nothing() -> None:
                await anyio.sleep(idle)

            quiet = await measure(r, "idle", 1, nothing, None)
        calls = dict(cost.calls)
        calls["hget"] = calls.get("hget", 0) - polls
        cost = dataclasses.replace(cost, calls=calls)
    return Row(
        names,
        cost,
        cost.slow_calls,
        cost.slowest_us,
        sum(quiet.calls.values()) / idle,
        quiet.cpu * 1e6 / idle,
    )


async def _main(args: argparse.Namespace) -> int:
    rows: dict[int, list[Row]] = {k: [] for k in args.names}
    with RedisServer() as server:
        r = Redis.from_url(server.url)
        try:
            version = (await r.info("server"))["redis_version"]
            for rep in range(args.reps):
                for k in args.names:
                    row = await _round(
                        r, server.url, k, args.jobs, args.concurrency, args.idle, args.slow_us
                    )
                    rows[k].append(row)
                    sys.stdout.write(
                        f"round {rep + 1}: {k:>4} names {row.rate:8.0f} jobs/s"
                        f" {row.cost.commands_per_job:6.2f} cmds/job"
                        f" {row.cost.cpu_us_per_job:6.1f} µs Redis CPU/job;"
                        f" calls over {args.slow_us} µs: {row.slow_calls}"
                        f" (slowest {row.slowest_us} µs);"
                        f" idle: {row.idle_cmds_per_s:.1f} cmds/s,"
                        f" {row.idle_cpu_us_per_s:.0f} µs CPU/s\n"
                    )
                    if args.breakdown:
                        sys.stdout.write("    " + row.cost.breakdown() + "\n")
                    sys.stdout.flush()
        finally:
            await r.aclose()
    sys.stdout.write(
        f"\nredis {version}, {args.jobs} jobs of one name, pool concurrency {args.concurrency},"
        f" median of {args.reps}\n"
        "| names | jobs/s | Redis cmds/job | Redis CPU µs/job | calls over"
        f" {args.slow_us} µs | idle cmds/s | idle Redis CPU µs/s |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    base = statistics.median(r.rate for r in rows[args.names[0]])
    for k, rs in rows.items():
        rate = statistics.median(r.rate for r in rs)
        sys.stdout.write(
            f"| {k} | {rate:,.0f} ({rate / base:.0%}) |"
            f" {statistics.median(r.cost.commands_per_job for r in rs):.2f} |"
            f" {statistics.median(r.cost.cpu_us_per_job for r in rs):.1f} |"
            f" {max(r.slow_calls for r in rs)} (slowest {max(r.slowest_us for r in rs)} µs) |"
            f" {statistics.median(r.idle_cmds_per_s for r in rs):.1f} |"
            f" {statistics.median(r.idle_cpu_us_per_s for r in rs):.0f} |\n"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_names", description=__doc__)
    parser.add_argument("--names", type=_names_list, default=[1, 500])
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    parser.add_argument("--concurrency", type=positive_int, default=100)
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--idle", type=float, default=6.0, help="seconds of idle pool measured")
    parser.add_argument("--slow-us", type=positive_int, default=1000)
    parser.add_argument("--breakdown", action="store_true", help="commands per job by name")
    parser.add_argument("--show-slow", action="store_true", help="print the slow calls")
    args = parser.parse_args(argv)
    return anyio.run(_main, args)


if __name__ == "__main__":
    configure_logging(level="warning")
    raise SystemExit(main())
