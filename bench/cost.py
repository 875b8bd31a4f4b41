"""What a no-op job costs, in units a noisy host does not move: the guard against slowdowns.

Wall-clock figures on this kind of machine move by up to 2x from one run to the next, so
a 25 % slowdown of the run path can pass unseen. Two counts hardly move:

- **worker**: Python function calls (Python and C, as ``sys.setprofile`` sees them) the
  pool's process makes per job, from the moment the queue is resumed to the last job's
  finish: fetch, handoff, run, middleware, log line, finish. One worker, no prefetch, so
  every job walks the same path (a fetch of one, a run, a finish of one), on uvloop as
  ``rota worker`` runs (the pure-Python asyncio loop's own calls vary with timing by
  ±5 %; uvloop's are made in C, and the count moves by about 1 % run to run);
- **redis**: commands Redis runs per job (``INFO commandstats``: the script calls and
  every command inside them), the Redis side of the same run.

``python -m bench.cost`` prints both; ``--record`` writes them to ``bench/budget.toml``,
which ``tests/test_cost_guard.py`` (part of ``make test``) compares a fresh measurement
against: it fails, naming the figure, when either grows by more than
:data:`TOLERANCE`. Raising the budget is a one-line change that its commit explains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path
from types import FrameType
from typing import Any, Final

import anyio
import redis

from bench.redis_server import RedisServer
from rota import Client, JobContext, JobSpec, WorkerPool
from rota.config import Settings
from rota.logging import JobLine, configure_logging

__all__ = ["BUDGET", "TOLERANCE", "measure", "over_budget"]

BUDGET: Final = Path(__file__).with_name("budget.toml")
TOLERANCE: Final = 0.10
NAME: Final = "noop"


async def _run(url: str, jobs: int, job_line: JobLine | None) -> dict[str, float]:
    settings = Settings(
        redis_url=url,
        namespace="cost",
        concurrency=1,
        prefetch=0,
        keep_result=0,
        keep_none=0,
        heartbeat_interval=60,
        lease=120,
        log_level="warning",
    )
    pool = WorkerPool(settings=settings)
    pool.job_line = job_line
    done = anyio.Event()
    count = 0

    @pool.job(name=NAME)
    async def noop(ctx: JobContext) -> None:
        nonlocal count
        count += 1
        if count == jobs:
            done.set()

    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    r = redis.Redis.from_url(url)
    async with Client.from_settings(settings) as client, pool.running():
        await client.pause(NAME)
        await client.enqueue_many([JobSpec(name=NAME)] * jobs)
        await anyio.sleep(0.2)  # the pool has settled into its wait
        r.config_resetstat()
        sys.setprofile(profile)
        try:
            await client.resume(NAME)
            await done.wait()
        finally:
            sys.setprofile(None)
        stats = r.info("commandstats")
    r.close()
    commands = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    return {"worker": round(calls / jobs, 1), "redis": round(commands / jobs, 2)}


def measure(jobs: int = 400) -> dict[str, float]:
    """Calls per job of the worker and commands per job of Redis, for ``jobs`` no-ops on
    a private redis-server, logging as ``rota worker`` does when its output is not a
    terminal (one JSON line per attempt, here to /dev/null). It configures logging for
    the whole process: run it in a process of its own (``python -m bench.cost``)."""
    with open(os.devnull, "w") as sink, RedisServer() as server:
        job_line = configure_logging("json", "info", sink)
        return anyio.run(_run, server.url, jobs, job_line, backend_options={"use_uvloop": True})


def budget() -> dict[str, float]:
    data = tomllib.loads(BUDGET.read_text(encoding="utf-8"))
    return {k: float(v) for k, v in data["per_noop_job"].items()}


def over_budget(measured: dict[str, float], allowed: dict[str, float]) -> list[str]:
    """One sentence per figure that grew past its budget by more than TOLERANCE."""
    out = []
    for name, limit in allowed.items():
        value = measured[name]
        if value > limit * (1 + TOLERANCE):
            out.append(
                f"{name}: {value} per no-op job, budget {limit} (+{value / limit - 1:.1%},"
                f" more than {TOLERANCE:.0%}): find the cause (python -m bench.cost), or"
                " raise the budget in bench/budget.toml and say why in the commit"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--record", action="store_true", help="write bench/budget.toml")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    measured = measure(args.jobs)
    if args.json:
        print(json.dumps(measured))  # noqa: T201
        return 0
    print(f"worker: {measured['worker']} Python calls per no-op job")  # noqa: T201
    print(f"redis: {measured['redis']} commands per no-op job")  # noqa: T201
    if args.record:
        BUDGET.write_text(
            "# What a no-op job may cost (python -m bench.cost --record writes it;\n"
            "# tests/test_cost_guard.py fails past +10 %). Raise a figure only with a\n"
            "# commit that says why.\n"
            "[per_noop_job]\n"
            f"worker = {measured['worker']}  # Python calls in the pool's process\n"
            f"redis = {measured['redis']}  # commands Redis runs\n",
            encoding="utf-8",
        )
        print(f"recorded in {BUDGET}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
