"""What a group with a callback costs Redis, next to as many plain jobs.

``python -m bench.workflow_cost [--jobs N] [--concurrency C] [--reps R]`` starts a
private redis-server and, R times over, measures four workloads, each in a namespace of
its own (with the machinery of :mod:`bench.redis_cost`):

- ``enqueue_many``: N plain noop jobs through one ``client.enqueue_many`` call;
- ``run``: N queued plain noop jobs run by an in-process ``rota.WorkerPool``;
- ``group``: N noop members and a noop callback through one ``client.group`` call;
- ``group run``: those N members and the callback run by the same kind of pool. The
  callback runs once, after the last member; it reads the members' results
  (``ctx.parent_results``), which is part of what the group costs.

Each figure is per job, for a group per member (the callback's cost spread over the
members). The summary gives the medians and what a group adds per member: commands and
µs of Redis CPU. It also checks that the callback ran exactly once, after every member,
that the group counts every member done and that no attempt failed; the command fails
(exit 1) when not.

The pool runs at concurrency 50 by default, as the figures in docs/performance.md were
measured ("Workflows: what a group with a callback costs"); ``--concurrency`` changes it.

``--json`` prints one JSON object instead (what ``python -m bench`` reads for its
``group`` workload); ``--breakdown`` adds the commands per job by name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import anyio
from redis.asyncio import Redis

import rota
from bench import positive_int
from bench.redis_cost import _JOB, Cost, _enqueue_many, _namespace, _run, measure
from bench.redis_server import RedisServer
from rota.logging import configure_logging

__all__ = ["Round", "main", "measure_round"]

#: The callback's argument, which tells it apart from the members (enqueue times).
CALLBACK = -1.0


@dataclass(frozen=True)
class Round:
    """One repetition of the four workloads."""

    plain_enqueue: Cost
    plain_run: Cost
    group_enqueue: Cost
    group_run: Cost
    callback_runs: int


def _specs(jobs: int) -> list[rota.JobSpec]:
    return [rota.JobSpec(name=_JOB, args=(time.time(),)) for _ in range(jobs)]


async def _group_enqueue(r: Redis, url: str, jobs: int) -> Cost:
    async with rota.Client.from_url(url, _namespace()) as client:
        # connect and load the scripts outside the window
        await client.group(_specs(2), then=rota.JobSpec(name=_JOB, args=(CALLBACK,)))
        specs = _specs(jobs)

        async def work() -> None:
            await client.group(specs, then=rota.JobSpec(name=_JOB, args=(CALLBACK,)))

        return await measure(r, "group", jobs, work, None)


class WorkflowError(Exception):
    pass


async def _group_run(r: Redis, url: str, jobs: int, concurrency: int) -> tuple[Cost, int]:
    """Run a group of ``jobs`` members and its callback; check that the callback ran
    once, last, and that the group counted every member."""
    order: list[float] = []
    made: dict[str, Any] = {}

    async def fill(client: rota.Client) -> int:
        g = await client.group(_specs(jobs), then=rota.JobSpec(name=_JOB, args=(CALLBACK,)))
        made["client"], made["group"] = client, g
        return jobs + 1

    async def check() -> None:
        client: rota.Client = made["client"]
        g: rota.Group = made["group"]
        assert g.then is not None
        progress = await client.group_progress(g.id)
        callback = await client.job(g.then.id)
        runs = order.count(CALLBACK)
        problems = []
        if runs != 1:
            problems.append(f"the callback ran {runs} times")
        elif order[-1] != CALLBACK:
            problems.append(f"the callback ran as job {order.index(CALLBACK) + 1} of {len(order)}")
        if (progress.total, progress.done, progress.failed) != (jobs, jobs, 0):
            problems.append(f"group counters {progress}")
        if callback is None or callback.state != "complete":
            problems.append(f"callback record {callback}")
        failed = int(
            await client.admin.shards[0].redis.hget(client.admin.shards[0].keys.stats, "failed")
            or 0
        )
        if failed:
            retrying = (await client.admin.page("retry", 0, 1)).jobs
            why = f" ({retrying[0].error})" if retrying else ""
            problems.append(f"{failed} attempts failed{why}")
        if problems:
            raise WorkflowError("; ".join(problems))

    cost = await _run(
        r,
        url,
        jobs,
        concurrency,
        None,
        label="group run",
        fill=fill,
        seen=order.append,
        check=check,
    )
    return cost, order.count(CALLBACK)


async def measure_round(r: Redis, url: str, jobs: int, concurrency: int) -> Round:
    plain_enqueue = await _enqueue_many(r, url, jobs, None)
    plain_run = await _run(r, url, jobs, concurrency, None)
    group_enqueue = await _group_enqueue(r, url, jobs)
    group_run, callbacks = await _group_run(r, url, jobs, concurrency)
    return Round(plain_enqueue, plain_run, group_enqueue, group_run, callbacks)


def summary(rounds: list[Round], jobs: int) -> dict[str, Any]:
    """Medians over the rounds, per job (per member for a group), and what a group adds."""

    def med(pick: str, what: str) -> float:
        costs: list[Cost] = [getattr(rd, pick) for rd in rounds]
        if what == "commands":
            return statistics.median([c.commands_per_job for c in costs])
        if what == "cpu_us":
            return statistics.median([c.cpu_us_per_job for c in costs])
        return statistics.median([c.seconds for c in costs])

    out: dict[str, Any] = {"jobs": jobs, "reps": len(rounds)}
    for key in ("plain_enqueue", "plain_run", "group_enqueue", "group_run"):
        for what in ("commands", "cpu_us", "seconds"):
            out[f"{key}_{what}"] = med(key, what)
    for what in ("commands", "cpu_us"):
        out[f"added_enqueue_{what}"] = out[f"group_enqueue_{what}"] - out[f"plain_enqueue_{what}"]
        out[f"added_run_{what}"] = out[f"group_run_{what}"] - out[f"plain_run_{what}"]
        out[f"added_{what}"] = out[f"added_enqueue_{what}"] + out[f"added_run_{what}"]
    out["callback_runs"] = [rd.callback_runs for rd in rounds]
    return out


async def _measure(url: str, jobs: int, concurrency: int, reps: int) -> tuple[str, list[Round]]:
    r = Redis.from_url(url)
    try:
        rounds = [await measure_round(r, url, jobs, concurrency) for _ in range(reps)]
        version: str = (await r.info("server"))["redis_version"]
    finally:
        await r.aclose()
    return version, rounds


def _text(
    version: str, rounds: list[Round], s: dict[str, Any], concurrency: int, breakdown: bool
) -> str:
    jobs = s["jobs"]
    lines = [f"redis {version}, {jobs} jobs or group members, pool concurrency {concurrency}"]
    for i, rd in enumerate(rounds, 1):
        lines.append(f"round {i}:")
        for cost in (rd.plain_enqueue, rd.plain_run, rd.group_enqueue, rd.group_run):
            lines.append("  " + cost.line())
            if breakdown:
                lines.append("      " + cost.breakdown())
        lines.append(f"  callback runs: {rd.callback_runs}")
    lines.append(f"median of {len(rounds)}, per job (group: per member, callback included):")
    lines.append(f"{'':<14} {'seconds':>10} {'cmds':>7} {'µs CPU':>8}")
    for label, key in (
        ("enqueue_many", "plain_enqueue"),
        ("group", "group_enqueue"),
        ("run", "plain_run"),
        ("group run", "group_run"),
    ):
        lines.append(
            f"{label:<14} {s[key + '_seconds']:>10.3f} {s[key + '_commands']:>7.2f}"
            f" {s[key + '_cpu_us']:>8.1f}"
        )
    lines.append(
        f"a group adds per member: enqueue {s['added_enqueue_commands']:+.2f} commands"
        f" {s['added_enqueue_cpu_us']:+.1f} µs, run {s['added_run_commands']:+.2f} commands"
        f" {s['added_run_cpu_us']:+.1f} µs; in all {s['added_commands']:+.2f} commands"
        f" {s['added_cpu_us']:+.1f} µs of Redis CPU"
    )
    return "\n".join(lines) + "\n"


async def _main(args: argparse.Namespace) -> None:
    if args.redis_url is None:
        with RedisServer() as server:
            version, rounds = await _measure(server.url, args.jobs, args.concurrency, args.reps)
    else:
        version, rounds = await _measure(args.redis_url, args.jobs, args.concurrency, args.reps)
    s = summary(rounds, args.jobs)
    if args.json:
        sys.stdout.write(json.dumps({"redis": version, "concurrency": args.concurrency, **s}))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_text(version, rounds, s, args.concurrency, args.breakdown))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_cost", description=__doc__)
    parser.add_argument("--jobs", type=positive_int, default=10_000, help="jobs, and members")
    parser.add_argument("--concurrency", type=positive_int, default=50)
    parser.add_argument("--breakdown", action="store_true", help="commands per job by name")
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object of the medians")
    parser.add_argument(
        "--redis-url",
        help="measure on this server instead of a private one (its other traffic counts too)",
    )
    args = parser.parse_args(argv)
    # The pools' warnings to stderr, without a line per job: stdout holds the figures.
    configure_logging("console", "warning", stream=sys.stderr)
    try:
        anyio.run(_main, args)
    except WorkflowError as exc:
        sys.stderr.write(f"workflow_cost: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
