"""Deep pages of a namespace over K shards (rota.client.pages): a private redis-server
holding ``--jobs`` jobs over ``--shards`` shards in a scheduled set (times with runs of
equal ms), a retry set whose jobs all share one time, and one queue (in enqueue order
but for a tenth of its jobs pushed back with an older time, as a promoted or retried job
is); then a page of 25 at several offsets of each: the median ms of ``--reps`` reads
after a warm-up, its round trips (one to all shards counts one) and commands, the page
alone (``select``) and with its records as the operator's view reads them (``view``).
The dead set's page is read both ways in the same run: the exact selection, and each
shard's first offset + 25 merged (what a page over several shards read before).

    python -m bench.deep_pages [--jobs 100000] [--shards 4] [--reps 5]
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import anyio

from bench import positive_int
from bench.redis_server import RedisServer
from rota import Client
from rota.client import pages, queue_pages
from rota.inspect import queue_view
from rota.protocol.job import JobSet

NS = "deep"
COUNT = 25


async def _fill(client: Client, jobs: int) -> None:
    rng = random.Random(1)
    shards = client.admin.shards
    at = 1_700_000_000_000
    for s in shards:
        await s.redis.delete(s.keys.queue("q"))
    for start in range(0, jobs, 5000):
        pipes = [s.redis.pipeline(transaction=False) for s in shards]
        for n in range(start, min(jobs, start + 5000)):
            at += rng.choice((0, 1, 2))
            shard = rng.randrange(len(shards))
            pipe, k = pipes[shard], shards[shard].keys
            job_id = f"j{n:07d}"
            back = rng.random() < 0.1  # a promoted or retried job: an older time
            record = {"name": "q", "args": f"[{n}]", "enqueued_at": at - 60_000 * back}
            pipe.hset(k.job(job_id), mapping=record)  # type: ignore[arg-type]
            pipe.zadd(k.scheduled, {job_id: at})
            pipe.zadd(k.dead, {job_id: at})
            pipe.zadd(k.retry, {job_id: 1_700_000_000_000})
            pipe.lpush(k.queue("q"), job_id)
        for pipe in pipes:
            await pipe.execute()


async def _timed(read: Callable[[], Awaitable[object]], reps: int) -> float:
    await read()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def _before(client: Client, offset: int) -> None:
    """The dead set's page as it was read over several shards: each one's first
    ``offset + COUNT``, merged."""
    each = await client.admin._route.each(lambda s: s.scored("dead", offset + COUNT))
    rows = sorted((-score, i) for _, got in each for score, i in got)
    assert len(rows[offset : offset + COUNT]) <= COUNT


async def _run(url: str, jobs: int, shards: int, reps: int) -> None:
    async with Client.from_url(url, NS, shards=shards) as client:
        started = time.perf_counter()
        await _fill(client, jobs)
        sys.stdout.write(f"filled {jobs:,} jobs over {shards} shards in ")
        sys.stdout.write(f"{time.perf_counter() - started:.1f} s\n\n")
        all_ = client.admin.shards
        rows = [
            "| page | offset | select ms | round trips | commands | view ms |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        offsets = [0, jobs // 2, jobs * 9 // 10, jobs - COUNT]
        sets: tuple[JobSet, ...] = ("scheduled", "retry", "dead")
        for which in sets:
            for offset in offsets:
                select: Callable[..., Awaitable[object]]
                view: Callable[[], Awaitable[object]]
                select = functools.partial(pages.job_set_page, all_, which, offset, COUNT)
                view = functools.partial(client.admin.page, which, offset, COUNT)
                rows.append(await _row(which, offset, select, view, reps))
        for newest in (False, True):
            for offset in offsets:
                select = functools.partial(
                    queue_pages.queue_page, all_, "q", offset, COUNT, newest=newest
                )
                view = functools.partial(queue_view, client, "q", offset, COUNT, newest)
                label = "queue, newest first" if newest else "queue"
                rows.append(await _row(label, offset, select, view, reps))
        sys.stdout.write("\n".join(rows) + "\n\n")
        sys.stdout.write("| dead set, same run | offset | exact selection ms | before ms |\n")
        sys.stdout.write("|---|---:|---:|---:|\n")
        for offset in offsets:
            exact = functools.partial(pages.job_set_page, all_, "dead", offset, COUNT)
            ms = await _timed(exact, reps)
            old = await _timed(functools.partial(_before, client, offset), reps)
            sys.stdout.write(f"| dead | {offset:,} | {ms:.1f} | {old:.1f} |\n")


async def _row(
    label: str,
    offset: int,
    select: Callable[..., Awaitable[object]],
    view: Callable[[], Awaitable[object]],
    reps: int,
) -> str:
    """A table row: the page alone (its cost counted once), then with its records."""
    cost = pages.Cost()
    await select(cost=cost)
    ms = await _timed(select, reps)
    shown = await _timed(view, reps)
    return f"| {label} | {offset:,} | {ms:.1f} | {cost.rounds} | {cost.commands} | {shown:.1f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deep_pages", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=100_000)
    parser.add_argument("--shards", type=positive_int, default=4)
    parser.add_argument("--reps", type=positive_int, default=5)
    args = parser.parse_args(argv)
    with RedisServer() as server:
        anyio.run(_run, server.url, args.jobs, args.shards, args.reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
