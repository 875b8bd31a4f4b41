"""What a no-op job costs, in units a noisy host does not move: the guard against slowdowns.

Wall-clock figures on this kind of machine move by up to 2x from one run to the next, so
a 25 % slowdown of the run path can pass unseen. Two counts hardly move:

- **worker**: Python function calls (Python and C, as ``sys.setprofile`` sees them) the
  pool's process makes for one job, on uvloop as ``rota worker`` runs. One worker, no
  prefetch: every job is one fetch of one job, one attempt, one finish of one outcome.
  Each call is charged to the nearest of a few functions on its stack: the **attempt**
  (``run_job`` and the worker's loop: decode, middleware, handler, log line), the
  **fetch** (``Fetcher._lease``, per fetch call), the **finish** (``Acker._send_first``,
  per finish call), the **retry** wrapper around both (``Watch.keep_trying``), and
  **other** (the replies' parsing, the wake-ups). What waits (for a job, for room, for
  an outcome to send: **wait**) is counted but not added: how often a task wakes to find
  nothing to do follows the host's timing, and it moved the whole count by 5-10 %.
  ``worker`` is attempt + fetch + finish + twice the retry + other, each part within
  about 1 % from run to run, loaded host or not. A call of a built-in type (``dict(x)``,
  ``list(x)``) is not a call to ``sys.setprofile`` on Python 3.11, and neither is
  bytecode that calls nothing: the count sees the functions a change adds, not every
  line (one ``d.copy()`` per attempt is one call in some 265);
- **redis**: commands Redis runs per job (``INFO commandstats``: the script calls and
  every command inside them), the Redis side of the same run.

``python -m bench.cost`` prints both, and the parts; ``--record`` writes them to
``bench/budget.toml``, which ``tests/test_cost_guard.py`` (part of ``make test``)
compares a fresh measurement against: it fails, naming the figure and the part that
grew, when ``worker`` or ``redis`` grows by more than :data:`TOLERANCE`. Raising the
budget is a one-line change that its commit explains.
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

__all__ = ["BUDGET", "FAILING_RATIO", "TOLERANCE", "measure", "measure_failing", "over_budget"]

BUDGET: Final = Path(__file__).with_name("budget.toml")
TOLERANCE: Final = 0.10
NAME: Final = "noop"
#: The most a failing job may cost, as a multiple of a no-op job (``worker`` and
#: ``redis``): when a service a pool's jobs call is down, every job fails, and a pool
#: that slows down then falls behind just as its backlog grows.
FAILING_RATIO: Final = 2.0


class Downstream(Exception):
    """What a failing job raises: the error of a service it calls."""


def _call_downstream(n: int) -> None:
    raise Downstream(f"service refused request {n}")


def _roots() -> dict[Any, str]:
    """The functions whose calls make up each part of a job's cost, by code object: a
    call is charged to the nearest of them on its stack. Waiting (for room, for a job,
    for an outcome to send) is "wait": how often a task wakes up to find nothing to do
    follows the host's timing, and so does that count."""
    from rota.redis import watch
    from rota.worker import acker, fetcher, handoff, runner, workers

    return {
        handoff.Handoff.take.__code__: "wait",
        handoff.Handoff.wait_room.__code__: "wait",
        acker.Acker.wait_room.__code__: "wait",
        acker.Acker.run.__code__: "wait",
        runner.run_job.__code__: "attempt",
        workers._worker.__code__: "attempt",
        fetcher.Fetcher._lease.__code__: "fetch",
        acker.Acker._send_first.__code__: "finish",
        watch.Watch.keep_trying.__code__: "retry",  # the wrapper of both
    }


def _entries() -> dict[Any, str]:
    """One call per fetch and per finish call: what their parts are divided by."""
    from rota.protocol import calls
    from rota.worker import fetcher

    return {
        fetcher.Fetcher._read.__code__: "fetch",
        calls.encode_outcomes.__code__: "finish",
    }


_ENTRIES: Final = _entries()


async def _run(
    url: str, jobs: int, job_line: JobLine | None, fail: bool, fair_keys: int = 0
) -> dict[str, float]:
    """Figures for ``jobs`` no-op jobs, or with ``fail`` jobs that raise (a frame below
    the handler, ``max_fails=1``: each one ends dead, its traceback kept); with
    ``fair_keys`` every job carries one of that many fair keys, in turn."""
    settings = Settings(
        redis_url=url,
        namespace="cost-failing" if fail else "cost",
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

    @pool.job(name=NAME, max_fails=1)
    async def noop(ctx: JobContext) -> None:
        nonlocal count
        count += 1
        if count == jobs:
            done.set()
        if fail:
            _call_downstream(count)

    counts = dict.fromkeys(("attempt", "fetch", "finish", "retry", "wait", "other"), 0)
    entries = dict.fromkeys(("fetch", "finish"), 0)
    roots = _roots()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" and event != "c_call":
            return
        code = frame.f_code
        if event == "call" and code in _ENTRIES:
            entries[_ENTRIES[code]] += 1
        where: FrameType | None = frame if event == "c_call" else frame.f_back
        part = "other"
        if code in roots:
            part = roots[code]
        else:
            while where is not None:
                found = roots.get(where.f_code)
                if found is not None:
                    part = found
                    break
                where = where.f_back
        counts[part] += 1

    r = redis.Redis.from_url(url)
    async with Client.from_settings(settings) as client, pool.running():
        await client.admin.pause(NAME)
        if fair_keys:
            keyed = [JobSpec(name=NAME, fair_key=f"k{i % fair_keys}") for i in range(jobs)]
            await client.enqueue_many(keyed)
        else:
            await client.enqueue_many([JobSpec(name=NAME)] * jobs)
        await anyio.sleep(0.2)  # the pool has settled into its wait
        r.config_resetstat()
        sys.setprofile(profile)
        try:
            await client.admin.resume(NAME)
            await done.wait()
        finally:
            sys.setprofile(None)
        stats = r.info("commandstats")
    r.close()
    commands = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    parts = {
        "attempt": counts["attempt"] / jobs,
        "fetch": counts["fetch"] / max(1, entries["fetch"]),
        "finish": counts["finish"] / max(1, entries["finish"]),
        "retry": counts["retry"] / max(1, entries["fetch"] + entries["finish"]),
        "other": counts["other"] / jobs,
    }
    worker = sum(parts.values()) + parts["retry"]  # one fetch and one finish per job
    return {
        "worker": round(worker, 1),
        "redis": round(commands / jobs, 2),
        **{k: round(v, 1) for k, v in parts.items()},
        "wait": round(counts["wait"] / jobs, 1),
    }


def measure(jobs: int = 400, fair_keys: int = 0) -> dict[str, float]:
    """Calls per job of the worker and commands per job of Redis, for ``jobs`` no-ops on
    a private redis-server, logging as ``rota worker`` does when its output is not a
    terminal (one JSON line per attempt, here to /dev/null). It configures logging for
    the whole process: run it in a process of its own (``python -m bench.cost``)."""
    with open(os.devnull, "w") as sink, RedisServer() as server:
        job_line = configure_logging("json", "info", sink)
        return anyio.run(
            _run,
            server.url,
            jobs,
            job_line,
            False,
            fair_keys,
            backend_options={"use_uvloop": True},
        )


def measure_failing(jobs: int = 400) -> dict[str, dict[str, float]]:
    """The figures of :func:`measure` for no-op jobs and for as many failing ones, in one
    process against one redis-server, one run after the other: ``{"noop": ...,
    "failing": ...}``."""

    async def both(url: str, job_line: JobLine | None) -> dict[str, dict[str, float]]:
        return {
            "noop": await _run(url, jobs, job_line, False),
            "failing": await _run(url, jobs, job_line, True),
        }

    with open(os.devnull, "w") as sink, RedisServer() as server:
        job_line = configure_logging("json", "info", sink)
        return anyio.run(both, server.url, job_line, backend_options={"use_uvloop": True})


def budget() -> dict[str, float]:
    data = tomllib.loads(BUDGET.read_text(encoding="utf-8"))
    return {k: float(v) for k, v in data["per_noop_job"].items()}


#: The figures the guard holds to their budget; the worker's parts only say where it grew.
GUARDED: Final = ("worker", "redis")
PARTS: Final = ("attempt", "fetch", "finish", "retry", "other")


def over_budget(measured: dict[str, float], allowed: dict[str, float]) -> list[str]:
    """One sentence per guarded figure that grew past its budget by more than
    TOLERANCE; for the worker, the part that grew the most is named."""
    out = []
    for name in GUARDED:
        value, limit = measured[name], allowed[name]
        if value > limit * (1 + TOLERANCE):
            grew = ""
            if name == "worker":
                deltas = {p: measured[p] - allowed[p] for p in PARTS if p in allowed}
                if deltas:
                    part = max(deltas, key=lambda p: deltas[p])
                    grew = f" (most in {part}: {allowed[part]} -> {measured[part]})"
            out.append(
                f"{name}: {value} per no-op job, budget {limit} (+{value / limit - 1:.1%},"
                f" more than {TOLERANCE:.0%}){grew}: find the cause (python -m bench.cost),"
                " or raise the budget in bench/budget.toml and say why in the commit"
            )
    return out


def failing_over(figures: dict[str, dict[str, float]]) -> list[str]:
    """One sentence per guarded figure of a failing job past FAILING_RATIO times the
    no-op job's of the same run; for the worker, the part that grew the most is named."""
    noop, failing = figures["noop"], figures["failing"]
    out = []
    for name in GUARDED:
        ratio = failing[name] / noop[name]
        if ratio > FAILING_RATIO:
            part = max(PARTS, key=lambda p: failing[p] - noop[p])
            grew = f" (most in {part}: {noop[part]} -> {failing[part]})" if name == "worker" else ""
            out.append(
                f"{name}: {failing[name]} per failing job, {ratio:.2f}x the {noop[name]} of a"
                f" no-op job (at most {FAILING_RATIO:g}x){grew}"
            )
    return out


def _compare_failing(jobs: int, *, as_json: bool) -> int:
    figures = measure_failing(jobs)
    if as_json:
        print(json.dumps(figures))  # noqa: T201
        return 0
    for kind, per in (("noop", "no-op job"), ("failing", "failing job")):
        measured = figures[kind]
        parts = ", ".join(f"{p} {measured[p]}" for p in PARTS)
        print(f"worker: {measured['worker']} Python calls per {per} ({parts})")  # noqa: T201
        print(f"redis: {measured['redis']} commands per {per}")  # noqa: T201
    for sentence in failing_over(figures) or ["failing jobs within their budget"]:
        print(sentence)  # noqa: T201
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--record", action="store_true", help="write bench/budget.toml")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--failing",
        action="store_true",
        help="measure no-op jobs and jobs that raise, and compare them",
    )
    parser.add_argument(
        "--fair-keys",
        type=int,
        default=0,
        metavar="N",
        help="every job with one of N fair keys (in turn): what a keyed job costs",
    )
    args = parser.parse_args(argv)
    if args.failing:
        return _compare_failing(args.jobs, as_json=args.json)
    measured = measure(args.jobs, args.fair_keys)
    if args.json:
        print(json.dumps(measured))  # noqa: T201
        return 0
    parts = ", ".join(f"{p} {measured[p]}" for p in PARTS)
    print(f"worker: {measured['worker']} Python calls per no-op job ({parts})")  # noqa: T201
    print(f"redis: {measured['redis']} commands per no-op job")  # noqa: T201
    if args.record:
        # (the sections after this one, [per_keyed_job] of bench.fair_cost, are kept)
        kept = BUDGET.read_text(encoding="utf-8").partition("\n[per_keyed_job]")
        BUDGET.write_text(
            "# What a no-op job may cost (python -m bench.cost --record writes it;\n"
            "# tests/test_cost_guard.py fails past +10 % of worker or redis). Raise a\n"
            "# figure only with a commit that says why.\n"
            "[per_noop_job]\n"
            f"worker = {measured['worker']}  # Python calls in the pool's process\n"
            f"redis = {measured['redis']}  # commands Redis runs\n"
            "# The worker's parts (not guarded one by one: they say where it grew)\n"
            + "".join(f"{p} = {measured[p]}\n" for p in PARTS)
            + kept[1]
            + kept[2],
            encoding="utf-8",
        )
        print(f"recorded in {BUDGET}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
