"""Redis's own cost per job: commands and CPU time spent inside redis-server.

``python -m bench.redis_cost [--jobs N] [--concurrency C]`` starts a private
redis-server and measures three workloads, each in a namespace of its own:

- ``enqueue one``: N calls of ``client.enqueue``, one at a time;
- ``enqueue_many``: the same N jobs through one ``client.enqueue_many`` call;
- ``run``: N queued noop jobs run by an in-process ``rota.WorkerPool``.

Commands come from ``INFO commandstats``, which counts the commands scripts and
functions run as well as the calls that ran them; CPU is the ``used_cpu_sys`` plus
``used_cpu_user`` delta of ``INFO cpu`` (the whole server process: parsing, replies,
scripts). The ``INFO`` calls themselves are left out. Throughput-oriented peers such as a
plain ``LPUSH``/``BRPOP`` queue spend about 32 µs of Redis CPU per whole job, the figure
these numbers are held against.

The run workload queues its jobs first and keeps their name paused while the pool
starts, so the pool's start-up (script loading, registration) is outside the window;
resuming the name opens it, and it closes once the last outcome is recorded. The pool's
heartbeat and reaper run inside the window, as they would in production. ``--keep-none``
and ``--complete-max`` set those settings of its pool: what keeping finished jobs costs
(``--complete-max`` under ``--jobs`` makes the finishes trim, as a pool does for good
once the cap is reached).

CPU time on a shared or virtual machine varies by tens of percent between runs.
``--callgrind`` runs the server under valgrind and adds the instructions it ran per job,
which hardly vary (see :mod:`bench.callgrind`; use ``--jobs 2000``, it is slow).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from redis.asyncio import Redis

import rota
from bench import positive_int
from bench.callgrind import CallgrindRedis
from bench.redis_server import RedisServer

__all__ = ["Cost", "main", "measure"]

_JOB = "noop"
_OWN = frozenset({"info", "slowlog|get", "slowlog|reset", "config|set"})


@dataclass(frozen=True)
class Snapshot:
    calls: dict[str, int]
    usec: dict[str, int]
    cpu: float
    user: float
    memory: int


@dataclass(frozen=True)
class Cost:
    """What one workload cost the server, per job."""

    label: str
    jobs: int
    seconds: float
    calls: dict[str, int]
    usec: dict[str, int]
    cpu: float
    user: float
    slowest_us: int = 0
    slowest_call: str = ""
    slow_calls: int = 0  # calls of at least SLOW_US
    memory: int = 0  # used_memory grew by this much (the jobs an enqueue left queued)
    instructions: int | None = None

    @property
    def commands_per_job(self) -> float:
        return sum(self.calls.values()) / self.jobs

    @property
    def cpu_us_per_job(self) -> float:
        return self.cpu * 1e6 / self.jobs

    def line(self) -> str:
        text = (
            f"{self.label:<14} {self.jobs:>7} jobs {self.seconds:7.2f} s"
            f" {self.commands_per_job:7.2f} commands/job {self.cpu_us_per_job:7.1f} µs CPU/job"
            f" ({self.user * 1e6 / self.jobs:.1f} user),"
            f" slowest call {self.slowest_us / 1000:.2f} ms ({self.slowest_call})"
        )
        if self.label.startswith("enqueue"):
            text += f" {self.memory / self.jobs:.0f} bytes/queued job"
        if self.instructions is not None:
            text += f" {self.instructions / self.jobs:8.0f} instructions/job"
        return text

    def breakdown(self) -> str:
        """Calls per job of each command, and the µs per job Redis timed them at (a
        script's time includes the commands it ran)."""
        parts = sorted(self.calls.items(), key=lambda kv: -kv[1])
        return "  ".join(
            f"{name} {n / self.jobs:.2f} ({self.usec.get(name, 0) / self.jobs:.1f} µs)"
            for name, n in parts
            if n
        )


async def _snapshot(r: Redis) -> Snapshot:
    stats: dict[str, Any] = await r.info("commandstats")
    cpu: dict[str, Any] = await r.info("cpu")
    memory: dict[str, Any] = await r.info("memory")
    rows = {k.removeprefix("cmdstat_"): v for k, v in stats.items() if k.startswith("cmdstat_")}
    return Snapshot(
        {name: int(v["calls"]) for name, v in rows.items()},
        {name: int(v["usec"]) for name, v in rows.items()},
        float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        float(cpu["used_cpu_user"]),
        int(memory["used_memory"]),
    )


Marker = Callable[[str], None]


async def measure(
    r: Redis,
    label: str,
    jobs: int,
    work: Callable[[], Awaitable[None]],
    mark: Marker | None,
    slow_us: int = 100,
) -> Cost:
    """Run ``work`` and return what it cost the server; ``mark`` ends a callgrind phase
    (see :mod:`bench.callgrind`) before and after the work, when the server runs under it."""
    # Calls of SLOW_US or more are logged: the slowest is one of them, and logging every
    # call would cost Redis CPU of its own. Under callgrind every call is slow and times
    # mean nothing: nothing is logged, so the instructions are the work's alone.
    await r.config_set("slowlog-log-slower-than", -1 if mark else slow_us)
    await r.config_set("slowlog-max-len", 100_000)
    await r.slowlog_reset()
    before = await _snapshot(r)
    if mark:
        await anyio.to_thread.run_sync(mark, label + ":before")
    start = time.perf_counter()
    await work()
    seconds = time.perf_counter() - start
    if mark:
        await anyio.to_thread.run_sync(mark, label)
    after = await _snapshot(r)
    slow = await r.slowlog_get(100_000)
    slowest = max(
        (e for e in slow if _head(e) not in ("INFO", "SLOWLOG")),
        key=lambda e: int(e["duration"]),
        default=None,
    )
    calls = {
        name: n - before.calls.get(name, 0)
        for name, n in after.calls.items()
        if name not in _OWN and n != before.calls.get(name, 0)
    }
    usec = {name: after.usec[name] - before.usec.get(name, 0) for name in calls}
    cpu, user = after.cpu - before.cpu, after.user - before.user
    cost = Cost(label, jobs, seconds, calls, usec, cpu, user, memory=after.memory - before.memory)
    if slowest is None:
        return cost
    return dataclasses.replace(
        cost,
        slowest_us=int(slowest["duration"]),
        slowest_call=_head(slowest),
        slow_calls=sum(1 for e in slow if _head(e) not in ("INFO", "SLOWLOG")),
    )


def _head(entry: dict[str, Any]) -> str:
    """A SLOWLOG entry's command, and the function or script it called."""
    command = entry["command"]
    text = command.decode("latin-1") if isinstance(command, bytes) else str(command)
    words = text.split(" ", 2)
    if words[0].upper() == "FCALL" and len(words) > 1:
        return words[1].split("_", 2)[-1]  # rota_<digest>_<script>
    return words[0].upper()


def _namespace() -> str:
    return "cost-" + uuid.uuid4().hex[:8]


async def _enqueue_one(r: Redis, url: str, jobs: int, mark: Marker | None) -> Cost:
    async with rota.Client.from_url(url, _namespace()) as client:
        await client.enqueue(_JOB, 0.0)  # connect and load the scripts outside the window

        async def work() -> None:
            for _ in range(jobs):
                await client.enqueue(_JOB, time.time())

        return await measure(r, "enqueue one", jobs, work, mark)


async def _enqueue_many(r: Redis, url: str, jobs: int, mark: Marker | None) -> Cost:
    async with rota.Client.from_url(url, _namespace()) as client:
        await client.enqueue_many([rota.JobSpec(name=_JOB, args=(0.0,))] * 2)
        specs = [rota.JobSpec(name=_JOB, args=(time.time(),)) for _ in range(jobs)]

        async def work() -> None:
            await client.enqueue_many(specs)

        return await measure(r, "enqueue_many", jobs, work, mark)


#: What a run queues while its job name is paused: it enqueues with the client it is
#: given and returns how many jobs will run (the window closes once they all completed).
Fill = Callable[[rota.Client], Awaitable[int]]


async def _plain(client: rota.Client, jobs: int) -> int:
    await client.enqueue_many([rota.JobSpec(name=_JOB, args=(time.time(),))] * jobs)
    return jobs


async def _run(
    r: Redis,
    url: str,
    jobs: int,
    concurrency: int,
    mark: Marker | None,
    *,
    label: str = "run",
    fill: Fill | None = None,
    seen: Callable[[float], None] | None = None,
    check: Callable[[], Awaitable[None]] | None = None,
    options: dict[str, Any] | None = None,
) -> Cost:
    """Run queued noop jobs with a pool and measure it, per one of ``jobs``. ``fill``
    queues them (``jobs`` plain ones by default); ``seen`` is told each job's argument as
    it runs; ``check`` runs once the pool stopped, outside the window; ``options`` are
    more settings of the pool (``keep_none``, ``complete_max_count``...)."""
    namespace = _namespace()
    settings = rota.Settings(
        redis_url=url,
        namespace=namespace,
        concurrency=concurrency,
        log_level="warning",
        **(options or {}),
    )
    pool = rota.WorkerPool(settings=settings)
    ran = 0
    expected = jobs
    all_ran = anyio.Event()

    @pool.job(name=_JOB)
    async def noop(t: float) -> None:
        nonlocal ran
        ran += 1
        if seen is not None:
            seen(t)
        if ran == expected:
            all_ran.set()

    async with rota.Client.from_url(url, namespace) as client:
        await client.admin.pause(_JOB)
        expected = await fill(client) if fill else await _plain(client, jobs)
        polls = 0

        async def work() -> None:
            nonlocal polls
            await client.admin.resume(_JOB)
            await all_ran.wait()
            while True:  # until the last outcome is recorded
                polls += 1
                if (
                    int(await r.hget(client.admin.shards[0].keys.stats, "processed") or 0)
                    >= expected
                ):
                    return
                await anyio.sleep(0.005)

        async with pool.running(url):
            await anyio.sleep(0.3)  # the first fetch found the name paused and waits
            cost = await measure(r, label, jobs, work, mark)
        if check is not None:
            await check()
        calls = dict(cost.calls)
        calls["hget"] = calls.get("hget", 0) - polls  # the watching, not the work
        return dataclasses.replace(cost, calls=calls)


async def _measure_all(
    url: str, jobs: int, concurrency: int, mark: Marker | None, options: dict[str, Any]
) -> tuple[str, list[Cost]]:
    r = Redis.from_url(url)
    try:
        costs = [
            await _enqueue_one(r, url, jobs, mark),
            await _enqueue_many(r, url, jobs, mark),
            await _run(r, url, jobs, concurrency, mark, options=options),
        ]
        version: str = (await r.info("server"))["redis_version"]
    finally:
        await r.aclose()
    return version, costs


async def _main(
    jobs: int,
    concurrency: int,
    breakdown: bool,
    url: str | None,
    callgrind: bool,
    options: dict[str, Any],
) -> None:
    if callgrind:
        with CallgrindRedis() as profiled:
            version, costs = await _measure_all(
                profiled.url, jobs, concurrency, profiled.mark, options
            )
            await anyio.to_thread.run_sync(profiled.mark, "end")
            costs = [
                dataclasses.replace(c, instructions=profiled.instructions(c.label)) for c in costs
            ]
    elif url is None:
        with RedisServer() as server:
            version, costs = await _measure_all(server.url, jobs, concurrency, None, options)
    else:
        version, costs = await _measure_all(url, jobs, concurrency, None, options)
    lines = [f"redis {version}, {jobs} jobs, pool concurrency {concurrency}"]
    for cost in costs:
        lines.append(cost.line())
        if breakdown:
            lines.append("    " + cost.breakdown())
    total = costs[0].cpu_us_per_job + costs[2].cpu_us_per_job
    lines.append(f"whole job (enqueue one + run): {total:.1f} µs of Redis CPU")
    sys.stdout.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_cost", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    parser.add_argument("--concurrency", type=positive_int, default=100)
    parser.add_argument("--breakdown", action="store_true", help="commands per job by name")
    parser.add_argument(
        "--redis-url",
        help="measure on this server instead of a private one (its other traffic counts too)",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="run the server under valgrind and count its instructions per job"
        " (steady where CPU time is not; slow: use --jobs 2000)",
    )
    parser.add_argument(
        "--keep-none",
        type=float,
        help="the pool's keep_none (seconds a job that returned None stays; default 60)",
    )
    parser.add_argument(
        "--complete-max",
        type=positive_int,
        help="the pool's complete_max_count (below --jobs: the run measures the trim too)",
    )
    args = parser.parse_args(argv)
    options: dict[str, Any] = {}
    if args.keep_none is not None:
        options["keep_none"] = args.keep_none
    if args.complete_max is not None:
        options["complete_max_count"] = args.complete_max
    anyio.run(
        _main, args.jobs, args.concurrency, args.breakdown, args.redis_url, args.callgrind, options
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
