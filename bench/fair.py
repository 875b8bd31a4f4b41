"""What fair keys cost the run path, measured the way the judged check does: in one run.

``python -m bench.fair`` (``make bench-fair``) runs three workloads of no-op jobs at
concurrency 20, each in a fresh process against a fresh private redis-server, and
repeats them alternately (plain, keyed, many, plain, keyed, many, ...) so that each sees
the same host:

- **plain**: ``--jobs`` jobs without a key;
- **keyed**: the same jobs, every one with a fair key (``--keys`` keys, in turn);
- **idle**: ``--idle-keys`` keys (100,000 by default) known to the name, each with a
  setting of its own (a weight, kept until cleared: an idle key without one leaves
  nothing behind), and ``--jobs`` jobs of one busy key; against **plain**;
- **wide**: ``--idle-keys`` keys with one queued job each, then ``--jobs`` jobs of one
  busy key: the set of ready keys holds them all while they run, every job counted,
  against as many jobs without a key (**plain-wide**).

It prints jobs per second (median of the repetitions) of each and the ratios to plain,
the figures docs/performance.md quotes ("Fair keys"). The
counted cost (Python calls and Redis commands per job, as ``bench.cost``) of a keyed job
is ``python -m bench.cost --fair-keys N``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio

from bench.redis_server import RedisServer

__all__ = ["main", "run_workload"]

NAMESPACE = "fair"
CONCURRENCY = 20


async def _workload(url: str, kind: str, jobs: int, keys: int, idle: int) -> dict[str, float]:
    from rota import Client, JobSpec, WorkerPool
    from rota.config import Settings

    client = Client.from_url(url, NAMESPACE)
    specs: list[JobSpec] = []
    if kind == "wide":
        specs += [JobSpec(name="noop", fair_key=f"idle-{i}") for i in range(idle)]
        specs += [JobSpec(name="noop", fair_key="busy")] * jobs
    elif kind == "idle":
        await _idle_keys(client, idle)
        specs += [JobSpec(name="noop", fair_key="busy")] * jobs
    elif kind == "keyed":
        specs += [JobSpec(name="noop", fair_key=f"k{i % keys}") for i in range(jobs)]
    else:
        specs += [JobSpec(name="noop")] * (jobs + (idle if kind == "plain-wide" else 0))
    for i in range(0, len(specs), 5000):
        await client.enqueue_many(specs[i : i + 5000])
    settings = Settings(
        redis_url=url, namespace=NAMESPACE, concurrency=CONCURRENCY, keep_result=0, keep_none=0
    )
    pool = WorkerPool(settings=settings)
    done = anyio.Event()
    count = 0
    total = len(specs)

    @pool.job(name="noop")
    async def noop() -> None:
        nonlocal count
        count += 1
        if count >= total:
            done.set()

    started = time.perf_counter()
    async with pool.running(client=client):
        await done.wait()
        wall = time.perf_counter() - started
    await client.close()
    return {"jobs_per_s": total / wall}


async def _idle_keys(client: Any, idle: int) -> None:
    """``idle`` keys of ``noop`` with a weight each, as ``client.admin.fair.set_weight``
    writes it (its script, 500 calls at a time)."""
    for i in range(0, idle, 500):
        async with anyio.create_task_group() as tg:
            for k in range(i, min(idle, i + 500)):
                tg.start_soon(client.admin.fair.set_weight, "noop", f"idle-{k}", 2)


def run_workload(kind: str, jobs: int, keys: int, idle: int) -> dict[str, float]:
    """One workload on a fresh redis-server, in this process."""
    from rota.logging import configure_logging

    configure_logging("json", "warning", sys.stderr)
    with RedisServer() as server:
        return anyio.run(
            _workload, server.url, kind, jobs, keys, idle, backend_options={"use_uvloop": True}
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fair", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=1000, help="keys of the keyed workload")
    parser.add_argument("--idle-keys", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a workload, in a child process
    args = parser.parse_args(argv)
    if args.one:
        figures = run_workload(args.one, args.jobs, args.keys, args.idle_keys)
        print(json.dumps(figures))  # noqa: T201
        return 0
    kinds = ("plain", "keyed", "idle", "plain-wide", "wide")
    seen: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.reps):
        for kind in kinds:
            command = [sys.executable, "-m", "bench.fair", "--one", kind]
            command += ["--jobs", str(args.jobs), "--keys", str(args.keys)]
            command += ["--idle-keys", str(args.idle_keys)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            seen[kind].append(json.loads(done.stdout.strip().splitlines()[-1])["jobs_per_s"])
    median = {k: statistics.median(v) for k, v in seen.items()}
    out: dict[str, Any] = {
        "jobs_per_s": {k: round(v) for k, v in median.items()},
        "keyed/plain": round(median["keyed"] / median["plain"], 3),
        "idle/plain": round(median["idle"] / median["plain"], 3),
        "wide/plain-wide": round(median["wide"] / median["plain-wide"], 3),
        "runs": {k: [round(x) for x in v] for k, v in seen.items()},
    }
    if args.json:
        print(json.dumps(out))  # noqa: T201
        return 0
    for kind in kinds:
        print(f"{kind:>10}: {median[kind]:8.0f} jobs/s  (runs: {out['runs'][kind]})")  # noqa: T201
    for ratio in ("keyed/plain", "idle/plain", "wide/plain-wide"):
        print(f"{ratio}: {out[ratio]:.1%}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
