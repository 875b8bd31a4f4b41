"""Judge a namespace over shards on a local Redis Cluster the way an operator would: with
``rota worker`` processes, a producer and the ``rota`` CLI.

``python -m bench.cluster_checks [resize|limit|down ...]`` starts three primaries with a
replica each (``tests/topology_servers.py``: ``redis-cli --cluster create
--cluster-replicas 1``) for each check and prints its figures:

- **resize**: two pools (``rota worker tests.chaos.app:pool``, two processes), a producer
  enqueueing all along, and ``rota shards resize 6`` then ``rota shards resize 3``: jobs
  sent, lost, run twice (the docs name one cause only: a pool killed or cut off, which
  this check does not do, so 0 expected), and the longest pause between two consecutive
  job starts during each change and over the run.
- **limit**: ``rota queue limit work 4`` (after the pools started) and 300 jobs of
  100 ms whose ids route them all to one shard (not shard 0, which keeps the limit),
  two pools of 10: the most running at once from the ledger of starts and ends, and
  from sampling the running count.
- **down**: the primary of shard 0 killed, then a pool started: the other shards' jobs
  run while it is away, and the killed one's after it is back: its replica promoted
  (a node timeout of 10 s, so that the pool starts well before), or with ``--restart``
  the replica may not fail over and the primary is started again on its snapshot.

Each worker appends start and done lines to a ledger file (tests/chaos/app.py), so a
start, an end and a second run are counted outside Redis.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from redis.crc import key_slot
from tests.chaos.harness import Fleet, Ledger, poll
from tests.topology_servers import ClusterGroup

from bench.judge import rota_cli, run_checks, say
from rota import Client, JobSpec
from rota.protocol.shards import shard_of, shard_tags

POOL = {"concurrency": 10, "lease": 5, "heartbeat_interval": 0.5}


@contextmanager
def cluster_and_fleet(
    node_timeout_ms: int = 2000,
) -> Iterator[tuple[ClusterGroup, Fleet, Ledger, str]]:
    with (
        tempfile.TemporaryDirectory(prefix="rota-judge-") as tmp,
        ClusterGroup(node_timeout_ms=node_timeout_ms) as cluster,
    ):
        for server in cluster.servers:  # the other slots are served while one is down
            with server.client() as r:
                r.config_set("cluster-require-full-coverage", "no")
        ledger = Ledger(Path(tmp) / "ledger.txt")
        fleet = Fleet(Path(tmp), ledger)
        try:
            yield cluster, fleet, ledger, "judge" + os.urandom(3).hex()
        finally:
            fleet.close()


def enqueue(url: str, namespace: str, specs: list[JobSpec]) -> list[str]:
    async def run() -> list[str]:
        async with Client.from_url(url, namespace, shards=3) as client:
            ids: list[str] = []
            for i in range(0, len(specs), 500):
                ids += [j.id for j in await client.enqueue_many(specs[i : i + 500])]
            return ids

    return anyio.run(run)


def states(url: str, namespace: str, ids: list[str]) -> Counter[str]:
    async def run() -> Counter[str]:
        async with Client.from_url(url, namespace) as client:
            out: Counter[str] = Counter()
            for job_id in ids:
                job = await client.job(job_id)
                out[job.state if job else "missing"] += 1
            return out

    return anyio.run(run)


def pools_up(fleet: Fleet, within: float = 60) -> None:
    poll(lambda: all(w.up_at for w in fleet.alive), within, "pools started", fleet.tails)


def longest_pause(times: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(sorted(times))), default=0.0)


class Producer(threading.Thread):
    """Enqueues a ``work`` job every ``every`` seconds until stopped, with one client
    built before any change (it learns of each change from a refused enqueue)."""

    def __init__(self, url: str, namespace: str, every: float) -> None:
        super().__init__(daemon=True)
        self.url, self.namespace, self.every = url, namespace, every
        self.sent: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        async def produce() -> None:
            async with Client.from_url(self.url, self.namespace, shards=3) as client:
                i = 0
                while not self.stop.is_set():
                    ms = 200 if i % 25 == 0 else 5  # some still run when a change starts
                    self.sent.append((await client.enqueue("work", ms=ms)).id)
                    i += 1
                    await anyio.sleep(self.every)

        try:
            anyio.run(produce)
        except BaseException as exc:  # reported by the check
            self.error = exc


def check_resize(steps: list[int], every: float) -> dict[str, Any]:
    with cluster_and_fleet() as (cluster, fleet, ledger, ns):
        url = cluster.url
        say(rota_cli(url, ns, "shards", "resize", "3").strip().replace("\n", " | "))
        for _ in range(2):
            fleet.start(url, ns, shards=3, **POOL)
        pools_up(fleet)
        producer = Producer(url, ns, every)
        producer.start()
        time.sleep(3)
        changes = []
        for to in steps:
            began = time.time()
            out = rota_cli(url, ns, "shards", "resize", str(to), "--timeout", "120")
            ended = time.time()
            say(f"resize {to}: {ended - began:.1f} s: " + out.strip().replace("\n", " | "))
            changes.append((to, began, ended))
            time.sleep(2)
        producer.stop.set()
        producer.join(30)
        if producer.error is not None:
            raise producer.error
        sent = producer.sent
        poll(
            lambda: set(ledger.by_job("done")) >= set(sent),
            120,
            "every job sent done",
            fleet.tails,
            every=0.5,
        )
        starts = ledger.by_job("start")
        start_times = [e.t for es in starts.values() for e in es]
        figures: dict[str, Any] = {
            "sent": len(sent),
            "lost": sum(1 for j in sent if j not in ledger.by_job("done")),
            "not complete": sum(n for s, n in states(url, ns, sent).items() if s != "complete"),
            "run twice": sum(len(starts[j]) - 1 for j in sent if len(starts.get(j, [])) > 1),
            "longest pause over the run (s)": round(
                longest_pause([t for t in start_times if t >= changes[0][1] - 3]), 3
            ),
        }
        for to, began, ended in changes:
            during = [t for t in start_times if began <= t <= ended]
            figures[f"-> {to}: starts during"] = len(during)
            figures[f"-> {to}: longest pause (s)"] = round(longest_pause(during), 3)
        figures["pools alive at the end"] = len(fleet.alive)
        return figures


def _running_at_once(ledger: Ledger, ids: set[str]) -> int:
    events = [(e.t, 1 if e.kind == "start" else -1) for e in ledger.entries() if e.job_id in ids]
    most = running = 0
    for _, step in sorted(events):  # at one instant, an end before a start
        running += step
        most = max(most, running)
    return most


def check_limit(limit: int, jobs: int) -> dict[str, Any]:
    with cluster_and_fleet() as (cluster, fleet, ledger, ns):
        url = cluster.url
        rota_cli(url, ns, "shards", "resize", "3")
        ids = [f"cap{i}" for i in range(jobs * 4) if shard_of(f"cap{i}", 3) == 2][:jobs]
        for _ in range(2):
            fleet.start(url, ns, shards=3, **POOL)
        pools_up(fleet)
        # After the pools' start: a pool that starts writes its handlers' own limit
        # (none for `work`) again (README, "rota queue limit").
        say(rota_cli(url, ns, "queue", "limit", "work", str(limit)).strip())
        enqueue(url, ns, [JobSpec(name="work", kwargs={"ms": 100}, job_id=j) for j in ids])
        sampled: list[int] = []

        async def sample() -> None:
            # Its count given: a client that does not enqueue reads the record only
            # when told to (docs/operations.md, "What holds during a change").
            async with Client.from_url(url, ns, shards=3) as client:
                deadline = time.monotonic() + 180
                while len(ledger.by_job("done")) < len(ids) and time.monotonic() < deadline:
                    sampled.append((await client.admin.queues(["work"]))[0].running)
                    await anyio.sleep(0.05)

        anyio.run(sample)
        return {
            "jobs (all in shard 2)": len(ids),
            "most running at once (ledger)": _running_at_once(ledger, set(ids)),
            "most running at once (sampled)": max(sampled),
            "samples": len(sampled),
            "lost": sum(1 for j in ids if j not in ledger.by_job("done")),
            "run twice": sum(1 for es in ledger.by_job("start").values() if len(es) > 1),
        }


def check_down(restart: bool, jobs: int) -> dict[str, Any]:
    # A node timeout of 10 s: the replica takes over well after the pool started.
    with cluster_and_fleet(node_timeout_ms=10_000) as (cluster, fleet, ledger, ns):
        url = cluster.url
        rota_cli(url, ns, "shards", "resize", "3")
        ids = enqueue(url, ns, [JobSpec(name="work", kwargs={"ms": 5}) for _ in range(jobs)])
        tags = shard_tags(ns, 3)
        victim = cluster.owner(key_slot(tags[0].encode()))  # shard 0: the worst case
        replica = cluster.replica_of(victim)
        if restart:
            with replica.client() as r:
                r.config_set("cluster-replica-no-failover", "yes")
            with victim.client() as r:  # it comes back with its data (no AOF here)
                r.save()
        held = [j for j in ids if shard_of(j, 3) == 0]
        elsewhere = {j for j in ids if shard_of(j, 3) != 0}
        victim.kill()
        killed = time.time()
        fleet.start(url, ns, shards=3, **POOL)
        poll(
            lambda: set(ledger.by_job("done")) >= elsewhere,
            120,
            "the other shards' jobs done",
            fleet.tails,
            every=0.2,
        )
        others_done = time.time()
        ran_while_down = sum(1 for j in held if j in ledger.by_job("start"))
        if restart:
            victim.start()
            back = time.time()
            poll(cluster.ok, 60, "the cluster whole again", every=0.2)
        else:
            poll(lambda: _primary(replica), 60, "the replica promoted", every=0.05)
            back = time.time()
        poll(
            lambda: set(ledger.by_job("done")) >= set(ids), 120, "every job done", fleet.tails, 0.2
        )
        dones = ledger.by_job("done")
        starts = ledger.by_job("start")
        return {
            "jobs": len(ids),
            "in the downed shard": len(held),
            "other shards' jobs done after the kill (s)": round(others_done - killed, 2),
            "downed shard's jobs started before it was back": ran_while_down,
            "downed shard back after the kill (s)": round(back - killed, 2),
            "downed shard's first job started after it was back (s)": round(
                min(starts[j][0].t for j in held) - back, 2
            ),
            "downed shard's jobs all done after it was back (s)": round(
                max(dones[j][0].t for j in held) - back, 2
            ),
            "lost": sum(1 for j in ids if j not in dones),
            "run twice": sum(1 for j in ids if len(starts.get(j, [])) > 1),
            "not complete": sum(n for s, n in states(url, ns, ids).items() if s != "complete"),
            "pool alive": len(fleet.alive),
        }


def _primary(server: Any) -> bool:
    with server.client(socket_timeout=1) as r:
        return bool(r.info("replication").get("role") == "master")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster_checks", description=__doc__)
    parser.add_argument("checks", nargs="*", default=["resize", "limit", "down"])
    parser.add_argument("--steps", default="6,3", help="the counts resize goes through")
    parser.add_argument("--every", type=float, default=0.01, help="seconds between enqueues")
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument(
        "--restart", action="store_true", help="down: no failover, the primary started again"
    )
    args = parser.parse_args(argv)
    return run_checks(
        parser,
        args.checks,
        {
            "resize": lambda: check_resize([int(n) for n in args.steps.split(",")], args.every),
            "limit": lambda: check_limit(args.limit, args.jobs),
            "down": lambda: check_down(args.restart, args.jobs),
        },
    )


if __name__ == "__main__":
    raise SystemExit(main())
