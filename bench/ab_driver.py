"""One workload of ``bench.ab``, run by the Python of the build under test.

It uses only what every build of rota has (``Client.from_url``, ``enqueue``,
``enqueue_many``, ``WorkerPool(settings=...)``, ``pool.job``, ``pool.running``), so the
same driver measures an older build and the work tree alike, and prints one JSON object
of figures. ``python bench/ab_driver.py WORKLOAD REDIS_URL [JOBS]``, WORKLOAD one of
``noop10``, ``noop100``, ``latency``, ``enqueue_one``, ``batch``, ``cost``, and
``fail100`` and ``cost_fail``: ``noop100`` and ``cost`` with jobs that raise.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

import anyio

from rota import Client, JobSpec, WorkerPool
from rota.config import Settings

NAMESPACE = "ab"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pool(url: str, **settings: Any) -> WorkerPool:
    """A pool logging as ``rota worker`` does off a terminal (JSON lines, here to
    /dev/null), when the build has that."""
    known = set(getattr(Settings, "__struct_fields__", ())) or set(settings)
    settings = {k: v for k, v in settings.items() if k in known}  # a build without it
    pool = WorkerPool(settings=Settings(redis_url=url, namespace=NAMESPACE, **settings))
    try:
        from rota.logging import configure_logging

        line = configure_logging("json", "info", open(os.devnull, "w"))  # noqa: SIM115
        if line is not None:
            pool.job_line = line  # type: ignore[attr-defined]
    except (ImportError, TypeError):
        pass
    return pool


class Downstream(Exception):
    """What a failing job raises: the error of a service it calls."""


def _call_downstream(n: int) -> None:
    raise Downstream(f"service refused request {n}")


def _noop_pool(
    url: str, jobs: int, fail: bool = False, **settings: Any
) -> tuple[WorkerPool, anyio.Event]:
    """A pool of no-op jobs, and the event set when ``jobs`` of them ran. With ``fail``
    each raises instead (from a function it calls, ``max_fails=1``: dead at once, its
    traceback kept), as every job does while a service they call is down."""
    pool = _pool(url, keep_result=0, **settings)
    done = anyio.Event()
    count = 0

    @pool.job(name="noop", max_fails=1)
    async def run() -> None:
        nonlocal count
        count += 1
        if count >= jobs:
            done.set()
        if fail:
            _call_downstream(count)

    return pool, done


async def noop(url: str, jobs: int, concurrency: int, fail: bool = False) -> dict[str, float]:
    client = Client.from_url(url, NAMESPACE)
    for i in range(0, jobs, 5000):
        await client.enqueue_many([JobSpec(name="noop") for _ in range(min(5000, jobs - i))])
    pool, done = _noop_pool(url, jobs, fail, concurrency=concurrency)
    started, cpu = time.perf_counter(), _cpu()
    async with pool.running(client=client):
        await done.wait()
        wall, cpu = time.perf_counter() - started, _cpu() - cpu
    await client.close()
    return {"jobs_per_s": jobs / wall, "cpu_us_per_job": cpu / jobs * 1e6}


async def latency(url: str, jobs: int) -> dict[str, float]:
    """Enqueue one job at a time to an idle pool (concurrency 10) and time it from
    before the enqueue to the start of its handler."""
    client = Client.from_url(url, NAMESPACE)
    pool = _pool(url, concurrency=10, keep_result=0)
    started = anyio.Event()
    at = [0.0]

    @pool.job(name="lat")
    async def run() -> None:
        at[0] = time.perf_counter()
        started.set()

    samples: list[float] = []
    async with pool.running(client=client):
        await anyio.sleep(0.3)  # the pool waits on its wake lists
        for _ in range(jobs):
            started = anyio.Event()
            sent = time.perf_counter()
            await client.enqueue("lat")
            await started.wait()
            samples.append(at[0] - sent)
            await anyio.sleep(0.002)  # idle again
    await client.close()
    samples.sort()
    return {
        "latency_p50_ms": samples[len(samples) // 2] * 1000,
        "latency_p99_ms": samples[int(len(samples) * 0.99)] * 1000,
    }


async def enqueue_one(url: str, jobs: int) -> dict[str, float]:
    client = Client.from_url(url, NAMESPACE)
    started = time.perf_counter()
    for i in range(jobs):
        await client.enqueue("one", i)
    wall = time.perf_counter() - started
    await client.close()
    return {"enqueue_one_per_s": jobs / wall}


async def batch(url: str, jobs: int) -> dict[str, float]:
    client = Client.from_url(url, NAMESPACE)
    specs = [JobSpec(name="many", args=(i,)) for i in range(jobs)]
    started = time.perf_counter()
    for i in range(0, jobs, 1000):
        await client.enqueue_many(specs[i : i + 1000])
    wall = time.perf_counter() - started
    await client.close()
    return {"enqueue_batch_per_s": jobs / wall}


async def cost(url: str, jobs: int, fail: bool = False) -> dict[str, float]:
    """Python calls in this process per no-op job (concurrency 1, no prefetch: every job
    walks the same path), counted by a profile hook, and commands Redis runs per job
    (INFO commandstats, the script calls and the commands inside them): figures a noisy
    host does not move."""
    client = Client.from_url(url, NAMESPACE)
    await client.enqueue_many([JobSpec(name="noop") for _ in range(jobs)])
    await client.admin.shards[0].redis.config_resetstat()
    pool, done = _noop_pool(url, jobs, fail, concurrency=1, prefetch=0, keep_none=0)
    calls = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    async with pool.running(client=client):
        sys.setprofile(hook)
        try:
            await done.wait()
        finally:
            sys.setprofile(None)
    stats = await client.admin.shards[0].redis.info("commandstats")
    await client.close()
    commands = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_config")
    return {"python_calls_per_job": calls / jobs, "redis_commands_per_job": commands / jobs}


def main() -> None:
    workload, url = sys.argv[1], sys.argv[2]
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000
    runs = {
        "noop10": lambda: noop(url, jobs, 10),
        "noop100": lambda: noop(url, jobs, 100),
        "latency": lambda: latency(url, min(jobs, 500)),
        "enqueue_one": lambda: enqueue_one(url, min(jobs, 5000)),
        "batch": lambda: batch(url, jobs),
        "cost": lambda: cost(url, min(jobs, 400)),
        "fail100": lambda: noop(url, jobs, 100, fail=True),
        "cost_fail": lambda: cost(url, min(jobs, 400), fail=True),
    }
    try:
        import uvloop  # noqa: F401

        options = {"use_uvloop": True}
    except ImportError:
        options = {}
    figures = anyio.run(runs[workload], backend_options=options)
    print(json.dumps(figures))  # noqa: T201


if __name__ == "__main__":
    main()
