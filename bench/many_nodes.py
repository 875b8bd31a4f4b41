"""The scale model checked on a cluster of many primaries: what a job, a pool's start and
an idle pool cost each node when the shards spread one or two a node.

``python -m bench.many_nodes [--nodes 48] [--per-node 1 2] [--jobs 20000] [--reps 2]``
makes a cluster of ``--nodes`` primaries without replicas (:class:`ClusterGroup`) and, for
K = ``--nodes`` times each ``--per-node`` in turn (the order repeated ``--reps`` times),
does what ``bench.scale_model`` does (enqueue ``--jobs`` no-op jobs, drain them with one
pool of ``--concurrency`` 50 in this process, wait ``--settle`` s, count the idle pool
for ``--idle`` s) and besides:

- times the pool's start (``WorkerPool.running`` until it yields, the jobs already
  queued) and counts the connections each primary accepted meanwhile: the shards'
  first connections share one ``CLUSTER SLOTS`` (on a short connection, to a node of
  the URL) that names every slot's owner (``rota.redis.slotmap``);
- at the end of the idle count, lists each primary's clients (``CLIENT LIST``; the
  read's own connection left out): the connections the pool holds on each node, and
  what they last ran.

With a hundred Redis processes on a few cores, their own cron and bus cost more CPU
than a run's jobs: the cluster's own CPU per node is measured first, with no pool, and
taken off each phase (its rate times the phase's length) in the "net" CPU columns.
The model this checks is in docs/performance.md ("The scale model").
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import anyio
from redis.crc import key_slot
from tests.topology_servers import ClusterGroup

from bench import positive_int
from bench.scale_model import (
    BATCH,
    Node,
    Primaries,
    each_k,
    floor,
    noop_pool,
    run_options,
    spent,
)
from rota import Client, JobSpec
from rota.logging import configure_logging
from rota.protocol.shards import shard_tags

__all__ = ["Clients", "Run", "clients", "holding", "main", "net_cpu", "run_k", "table"]


@dataclass
class Clients:
    """One primary's clients other than the reader: how many, and by last command."""

    count: int
    by_command: dict[str, int] = field(default_factory=dict)


def clients(nodes: Primaries) -> list[Clients]:
    """Each primary's clients (``CLIENT LIST``) but the connection that asks: while
    nothing else connects to the cluster, the pool's connections."""
    out = []
    for r in nodes._conns:
        own = r.client_id()
        rows = [c for c in r.client_list() if int(c["id"]) != own]
        out.append(Clients(len(rows), dict(Counter(str(c.get("cmd", "")) for c in rows))))
    return out


def holding(nodes: Primaries, tags: Sequence[str]) -> list[int]:
    """How many of ``tags`` each primary serves, from one ``CLUSTER SLOTS``."""
    ranges = nodes._conns[0].execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    ports = [s.port for s in nodes.servers]
    counts = [0] * len(ports)
    for tag in tags:
        slot = key_slot(tag.encode())
        port = next(int(p[1]) for lo, hi, p, *_ in ranges if lo <= slot <= hi)
        counts[ports.index(port)] += 1
    return counts


@dataclass
class Run:
    """One K, one repetition: per primary (port order) each phase, its length in
    seconds, the pool's clients when idle and the shards each primary holds."""

    shards: int
    jobs: int
    jobs_per_s: float
    shards_per_node: list[int]
    enqueue: list[Node]
    start: list[Node]
    run: list[Node]  # from the start's end to the last job's finish
    idle: list[Node]
    seconds: dict[str, float]
    clients: list[Clients]

    def per_job(self, attr: str) -> list[float]:
        """``attr`` of each node per job: enqueue, start and run (the start's commands
        are the pool's, but its fetchers run jobs before it ends)."""
        return [
            (getattr(e, attr) + getattr(s, attr) + getattr(r, attr)) / self.jobs
            for e, s, r in zip(self.enqueue, self.start, self.run, strict=True)
        ]


def net_cpu(run: Run, alone_per_s: Sequence[float], phase: str = "job") -> list[float]:
    """Each node's CPU µs in ``phase`` (job: per job over enqueue, start and run; idle:
    per second) less what the node spends on its own at that length."""
    if phase == "idle":
        s = run.seconds["idle"]
        return [n.cpu_us / s - a for n, a in zip(run.idle, alone_per_s, strict=True)]
    s = run.seconds["enqueue"] + run.seconds["start"] + run.seconds["run"]
    return [u - a * s / run.jobs for u, a in zip(run.per_job("cpu_us"), alone_per_s, strict=True)]


async def _one(
    nodes: Primaries, shards: int, jobs: int, concurrency: int, settle: float, idle: float
) -> Run:
    """Enqueue, start, drain and idle one namespace of ``shards``; see the docstring."""
    url, ns = nodes.cluster.url, "nodes" + uuid.uuid4().hex[:8]
    pool, done, marks = noop_pool(url, ns, shards, concurrency, jobs)

    where = holding(nodes, shard_tags(ns, shards))
    async with Client.from_url(url, ns, shards=shards) as client:
        s0, t0 = nodes.read(), time.monotonic()
        for i in range(0, jobs, BATCH):
            await client.enqueue_many(JobSpec(name="noop") for _ in range(min(BATCH, jobs - i)))
        s1, t1 = nodes.read(), time.monotonic()
    async with pool.running():
        t2 = time.monotonic()
        s2 = nodes.read()
        with anyio.fail_after(900):
            await done.wait()
        s3, t3 = nodes.read(), time.monotonic()
        await anyio.sleep(settle)
        s4, t4 = nodes.read(), time.monotonic()
        await anyio.sleep(idle)
        s5, t5 = nodes.read(), time.monotonic()
        held = clients(nodes)
    return Run(
        shards=shards,
        jobs=jobs,
        jobs_per_s=(jobs - 1) / max(marks[-1] - marks[0], 1e-9),
        shards_per_node=where,
        enqueue=spent(s0, s1),
        start=spent(s1, s2),
        run=spent(s2, s3),
        idle=spent(s4, s5),
        seconds={"enqueue": t1 - t0, "start": t2 - t1, "run": t3 - t2, "idle": t5 - t4},
        clients=held,
    )


def run_k(
    nodes: Primaries, k: int, *, jobs: int, settle: float, idle: float, concurrency: int = 50
) -> Run:
    """:func:`_one` for one K, on uvloop; ``bench.scale_model.each_k`` repeats it."""
    return anyio.run(
        _one, nodes, k, jobs, concurrency, settle, idle, backend_options={"use_uvloop": True}
    )


def _spread(values: Sequence[float], digits: int) -> str:
    """A sum over the nodes, then the median node and the range."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{sum(values):.{digits}f} ({mid:.{digits}f}; {lo:.{digits}f}-{hi:.{digits}f})"


HEADER = (
    "| K | shards per node | jobs/s | cmds/job (median node; range) | calls/job "
    "| net CPU µs/job (median node; range) | gross CPU µs/job "
    "| idle cmds/s (median node; range) | idle connects/s | idle net CPU ms/s "
    "| pool connections per node "
    "| start s | start connections (per node) |"
)


def table(runs: Sequence[Run], alone_per_s: Sequence[float]) -> str:
    """One row per run: sums over the primaries, the median primary and the range."""
    lines = [HEADER, "|---" * HEADER.count(" | ") + "|---|"]
    for r in runs:
        held = [c.count for c in r.clients]
        conns = [n.connections for n in r.start]
        spread = sorted(Counter(r.shards_per_node).items())
        lines.append(
            f"| {r.shards} | {', '.join(f'{k} on {n}' for k, n in spread)} "
            f"| {r.jobs_per_s:,.0f} | {_spread(r.per_job('commands'), 2)} "
            f"| {sum(r.per_job('reads')):.2f} | {_spread(net_cpu(r, alone_per_s), 2)} "
            f"| {sum(r.per_job('cpu_us')):.1f} "
            f"| {_spread([n.commands / r.seconds['idle'] for n in r.idle], 2)} "
            f"| {sum(n.connections for n in r.idle) / r.seconds['idle']:.1f} "
            f"| {sum(net_cpu(r, alone_per_s, 'idle')) / 1e3:.1f} "
            f"| {statistics.median(held):g} ({min(held)}-{max(held)}; {sum(held)} in all) "
            f"| {r.seconds['start']:.1f} "
            f"| {sum(conns)} ({statistics.median(conns):g}; {min(conns)}-{max(conns)}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_nodes", description=__doc__)
    parser.add_argument(
        "--nodes", type=positive_int, default=48, help="primaries, 3 or more (100: see the docs)"
    )
    parser.add_argument("--per-node", type=positive_int, nargs="+", default=[1, 2])
    run_options(parser, idle=20.0)
    args = parser.parse_args(argv)
    configure_logging("json", "warning", sys.stderr)
    made = time.monotonic()
    with ClusterGroup(replicas=0, primaries=args.nodes) as cluster:
        made = time.monotonic() - made
        nodes = Primaries(cluster)
        alone = floor(nodes, args.idle)
        alone_per_s = [n.cpu_us / args.idle for n in alone]
        each = functools.partial(
            run_k,
            nodes,
            jobs=args.jobs,
            settle=args.settle,
            idle=args.idle,
            concurrency=args.concurrency,
        )
        runs = each_k(nodes, [args.nodes * p for p in args.per_node], args.reps, each)
        nodes.close()
    if args.json:
        out = {"made_s": made, "alone_cpu_us_per_s": alone_per_s, "runs": [asdict(r) for r in runs]}
        print(json.dumps(out))  # noqa: T201
        return 0
    commands = Counter[str]()
    for r in runs:
        for c in r.clients:
            commands.update(c.by_command)
    lines = [
        table(runs, alone_per_s),
        "",
        f"{args.nodes} primaries made in {made:.1f} s; alone, CPU ms/s per node: "
        + _spread([v / 1e3 for v in alone_per_s], 2),
        "idle pool's connections by last command, all runs: "
        + ", ".join(f"{k} {v}" for k, v in commands.most_common()),
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
