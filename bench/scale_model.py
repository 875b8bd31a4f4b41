"""The scale model's measurements: what a job and an idle pool cost each node of a
cluster, by shard count.

``python -m bench.scale_model [--shards 1 3 6 12] [--jobs 20000] [--reps 2] [--json]``
makes a cluster of three primaries (no replicas; ``redis-cli --cluster create`` on free
ports, :class:`tests.topology_servers.ClusterGroup`) and, for each K in turn (the order
repeated ``--reps`` times, so that a slow spell of a shared host falls on every K), in a
new namespace of K shards after a FLUSHALL:

1. enqueues ``--jobs`` no-op jobs with ``enqueue_many`` (1,000 a call);
2. starts one pool in this process (``--concurrency`` 50, default settings otherwise)
   and waits until every job has run: jobs/s from the first start to the last finish;
3. waits ``--settle`` seconds (10: past the connections a pool opens in its first
   seconds, each of which asks every primary who owns its slot), then counts what the
   pool, idle now, costs over ``--idle`` seconds.

Before and after each phase it reads every primary's ``INFO commandstats`` (every
command Redis ran, those inside scripts included; the reads' own INFO calls are taken
off), ``INFO cpu`` (``used_cpu_user + used_cpu_sys``: the process's CPU time, with µs
resolution) and ``INFO stats`` (requests read: calls, a pipeline one; connections).
Per job and per node, CPU time rather than wall time: the host is shared, and what a
command costs a node moves less with the load than how long a run takes. The cluster
with no pool is measured once first (its bus and cron: the floor of the idle rows).
The model these feed is in docs/performance.md ("The scale model").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import anyio
from redis.crc import key_slot
from tests.redis_server import RedisServer
from tests.topology_servers import ClusterGroup

from bench import positive_int, positive_seconds, seconds
from rota import Client, JobSpec, WorkerPool
from rota.config import Settings
from rota.logging import configure_logging
from rota.protocol.shards import shard_tags

__all__ = [
    "Node",
    "Primaries",
    "Run",
    "ceiling",
    "each_k",
    "fit_line",
    "floor",
    "main",
    "measure",
    "noop_pool",
    "spent",
    "summary",
    "table",
]

R = TypeVar("R")

#: enqueue_many's specs per call: 20 pipelines of 20 scripts of 50 jobs for 20,000.
BATCH = 1000


@dataclass(frozen=True)
class Node:
    """What one primary did in one phase: commands (commandstats; not their µs, which
    count a script's inner commands twice), CPU µs (INFO cpu), requests read
    (``total_reads_processed``: about one per call or pipeline), connections accepted."""

    commands: int
    cpu_us: float
    reads: int
    connections: int


@dataclass
class Run:
    """One K, one repetition: per primary (in port order) the enqueue, run and idle
    phases, and the shards each primary holds."""

    shards: int
    jobs: int
    jobs_per_s: float
    shards_per_node: list[int]
    enqueue: list[Node]
    run: list[Node]
    idle: list[Node]
    idle_s: float

    def per_job(self, field: str, phase: str = "job") -> list[float]:
        """``field`` of each node per job in ``phase``: enqueue, run, or job (both)."""
        phases = ("enqueue", "run") if phase == "job" else (phase,)
        return [
            sum(getattr(getattr(self, p)[i], field) for p in phases) / self.jobs
            for i in range(len(self.run))
        ]

    def idle_per_s(self, field: str) -> list[float]:
        """``field`` of each node per second while the pool idles."""
        return [getattr(n, field) / self.idle_s for n in self.idle]


class Primaries:
    """The cluster's primaries (port order), each with a connection held open for the
    reads: a new connection per read would add its HELLO to the counts."""

    def __init__(self, cluster: ClusterGroup) -> None:
        self.cluster = cluster
        self.servers: list[RedisServer] = []
        for server in sorted(cluster.servers, key=lambda s: s.port):
            with server.client(socket_timeout=5) as r:
                if r.info("replication").get("role") == "master":
                    self.servers.append(server)
        self._conns = [s.client(socket_timeout=30) for s in self.servers]

    def read(self) -> list[Node]:
        """Each node's commands so far and CPU time: one INFO call each, which the next
        read's delta counts and :func:`spent` takes off."""
        out = []
        for r in self._conns:
            info = r.info("commandstats", "cpu", "stats")
            stats = [v for k, v in info.items() if str(k).startswith("cmdstat_")]
            out.append(
                Node(
                    commands=sum(int(v["calls"]) for v in stats),
                    cpu_us=(float(info["used_cpu_user"]) + float(info["used_cpu_sys"])) * 1e6,
                    reads=int(info["total_reads_processed"]),
                    connections=int(info["total_connections_received"]),
                )
            )
        return out

    def flush(self) -> None:
        for r in self._conns:
            r.flushall()

    def holding(self, tags: Sequence[str]) -> list[int]:
        """How many of ``tags`` each primary serves."""
        owners = [self.cluster.owner(key_slot(t.encode())).port for t in tags]
        return [owners.count(s.port) for s in self.servers]

    def close(self) -> None:
        for r in self._conns:
            r.close()


def spent(before: list[Node], after: list[Node]) -> list[Node]:
    """What each node did between two reads, the first read's own INFO taken off (its
    CPU stays: a few µs, against milliseconds)."""
    return [
        Node(
            commands=a.commands - b.commands - 1,
            cpu_us=a.cpu_us - b.cpu_us,
            reads=a.reads - b.reads - 1,
            connections=a.connections - b.connections,
        )
        for b, a in zip(before, after, strict=True)
    ]


def noop_pool(
    url: str, ns: str, shards: int, concurrency: int, jobs: int
) -> tuple[WorkerPool, anyio.Event, list[float]]:
    """A pool (default settings otherwise) of the job ``noop``, which notes when each
    run ends; the event is set once ``jobs`` have."""
    settings = Settings(redis_url=url, namespace=ns, shards=shards, concurrency=concurrency)
    pool = WorkerPool(settings=settings)
    done = anyio.Event()
    marks: list[float] = []

    @pool.job(name="noop")
    async def noop(ctx: object) -> None:
        marks.append(time.monotonic())
        if len(marks) == jobs:
            done.set()

    return pool, done, marks


async def _one(
    nodes: Primaries, shards: int, jobs: int, concurrency: int, settle: float, idle: float
) -> Run:
    """Enqueue, drain and idle one namespace of ``shards``; see the module docstring."""
    url, ns = nodes.cluster.url, "scale" + uuid.uuid4().hex[:8]
    pool, done, marks = noop_pool(url, ns, shards, concurrency, jobs)

    async with Client.from_url(url, ns, shards=shards) as client:
        s0 = nodes.read()
        for i in range(0, jobs, BATCH):
            await client.enqueue_many(JobSpec(name="noop") for _ in range(min(BATCH, jobs - i)))
        s1 = nodes.read()
    async with pool.running():
        with anyio.fail_after(600):
            await done.wait()
        s2 = nodes.read()
        await anyio.sleep(settle)
        s3, t3 = nodes.read(), time.monotonic()
        await anyio.sleep(idle)
        s4, t4 = nodes.read(), time.monotonic()
    return Run(
        shards=shards,
        jobs=jobs,
        jobs_per_s=(jobs - 1) / max(marks[-1] - marks[0], 1e-9),
        shards_per_node=nodes.holding(shard_tags(ns, shards)),
        enqueue=spent(s0, s1),
        run=spent(s1, s2),
        idle=spent(s3, s4),
        idle_s=t4 - t3,
    )


def each_k(
    nodes: Primaries, shard_counts: Sequence[int], reps: int, one: Callable[[int], R]
) -> list[R]:
    """``one(K)`` for every K in ``shard_counts``, the order repeated ``reps`` times, each
    after a FLUSHALL (the runs before leave their finished jobs)."""
    runs = []
    for _ in range(reps):
        for k in shard_counts:
            nodes.flush()
            runs.append(one(k))
    return runs


def measure(
    nodes: Primaries,
    shard_counts: Sequence[int],
    *,
    jobs: int,
    reps: int,
    concurrency: int = 50,
    settle: float = 10.0,
    idle: float = 10.0,
) -> list[Run]:
    """:func:`_one` for every K (:func:`each_k`)."""

    def one(k: int) -> Run:
        return anyio.run(
            _one, nodes, k, jobs, concurrency, settle, idle, backend_options={"use_uvloop": True}
        )

    return each_k(nodes, shard_counts, reps, one)


def floor(nodes: Primaries, seconds: float) -> list[Node]:
    """What each primary does with no pool at all, over ``seconds``: the cluster's own."""
    before = nodes.read()
    time.sleep(seconds)
    return spent(before, nodes.read())


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = a + b * x``: the idle cost's fixed part and its part per shard."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def ceiling(nodes: int, cpu_us_per_job: float) -> float:
    """Jobs/s that ``nodes`` primaries carry, each a single thread, when a job costs
    ``cpu_us_per_job`` of Redis CPU summed over the nodes and the shards spread the jobs
    evenly (K a multiple of ``nodes``)."""
    return nodes * 1e6 / cpu_us_per_job


def _cells(values: Sequence[float], digits: int) -> str:
    return f"{sum(values):.{digits}f} (" + " / ".join(f"{v:.{digits}f}" for v in values) + ")"


HEADER = (
    "| K | shards per node | jobs/s | cmds/job enqueue | cmds/job run "
    "| cmds/job (per node) | calls/job | CPU µs/job enqueue | CPU µs/job run "
    "| CPU µs/job (per node) | idle cmds/s (per node) "
    "| idle connects/s | idle CPU ms/s (per node) |"
)


def table(runs: Sequence[Run]) -> str:
    """One row per run: sums over the primaries, and each one's part (port order) in
    brackets. Calls: requests read (a pipeline is one)."""
    lines = [HEADER, "|---" * HEADER.count(" | ") + "|---|"]
    for r in runs:
        lines.append(
            f"| {r.shards} | {'/'.join(map(str, r.shards_per_node))} | {r.jobs_per_s:,.0f} "
            f"| {sum(r.per_job('commands', 'enqueue')):.2f} "
            f"| {sum(r.per_job('commands', 'run')):.2f} "
            f"| {_cells(r.per_job('commands'), 2)} | {sum(r.per_job('reads')):.2f} "
            f"| {sum(r.per_job('cpu_us', 'enqueue')):.1f} "
            f"| {sum(r.per_job('cpu_us', 'run')):.1f} "
            f"| {_cells(r.per_job('cpu_us'), 1)} "
            f"| {_cells(r.idle_per_s('commands'), 1)} "
            f"| {sum(r.idle_per_s('connections')):.1f} "
            f"| {_cells([v / 1e3 for v in r.idle_per_s('cpu_us')], 2)} |"
        )
    return "\n".join(lines)


def summary(runs: Sequence[Run], alone: list[Node], alone_s: float) -> dict[str, Any]:
    """The model's constants: the cluster's own CPU, the idle pool's commands/s fitted
    as a + b * K, and by K the sums per job and the ceiling of 100 primaries at that
    CPU per job."""
    by_k: dict[int, list[Run]] = {}
    for run in runs:
        by_k.setdefault(run.shards, []).append(run)
    a, b = fit_line([r.shards for r in runs], [sum(r.idle_per_s("commands")) for r in runs])
    return {
        "cluster_alone_cpu_ms_per_s": [n.cpu_us / 1e3 / alone_s for n in alone],
        "idle_commands_per_s": {"a": a, "b_per_shard": b},
        "by_k": {
            k: {
                "commands_per_job": [sum(r.per_job("commands")) for r in rs],
                "cpu_us_per_job": [sum(r.per_job("cpu_us")) for r in rs],
                "jobs_per_s": [r.jobs_per_s for r in rs],
                "ceiling_100_nodes": [ceiling(100, sum(r.per_job("cpu_us"))) for r in rs],
            }
            for k, rs in sorted(by_k.items())
        },
    }


def run_options(parser: argparse.ArgumentParser, *, idle: float) -> None:
    """The options of a run of the model, here and in :mod:`bench.many_nodes`: jobs,
    repetitions, concurrency, the settle and idle seconds (``idle`` by default), JSON."""
    parser.add_argument("--jobs", type=positive_int, default=20_000)
    parser.add_argument("--reps", type=positive_int, default=2)
    parser.add_argument("--concurrency", type=positive_int, default=50)
    parser.add_argument("--settle", type=seconds, default=10.0, help="seconds after the drain")
    parser.add_argument(
        "--idle", type=positive_seconds, default=idle, help="seconds of the idle count"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_model", description=__doc__)
    parser.add_argument("--shards", type=positive_int, nargs="+", default=[1, 3, 6, 12])
    run_options(parser, idle=10.0)
    args = parser.parse_args(argv)
    configure_logging("json", "warning", sys.stderr)
    with ClusterGroup(replicas=0) as cluster:
        nodes = Primaries(cluster)
        alone = floor(nodes, args.idle)
        runs = measure(
            nodes,
            args.shards,
            jobs=args.jobs,
            reps=args.reps,
            concurrency=args.concurrency,
            settle=args.settle,
            idle=args.idle,
        )
        nodes.close()
    figures = summary(runs, alone, args.idle)
    if args.json:
        print(json.dumps({"runs": [asdict(r) for r in runs], "summary": figures}))  # noqa: T201
        return 0
    fit = figures["idle_commands_per_s"]
    lines = [
        table(runs),
        "",
        "cluster alone, CPU ms/s per node: "
        + " / ".join(f"{v:.2f}" for v in figures["cluster_alone_cpu_ms_per_s"]),
        f"idle pool, commands/s over the primaries: {fit['a']:.2f} + {fit['b_per_shard']:.2f} * K",
    ]
    for k, row in figures["by_k"].items():
        at = ", ".join(f"{v:,.0f}" for v in row["ceiling_100_nodes"])
        lines.append(f"K={k}: 100 primaries at this CPU per job carry {at} jobs/s")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
