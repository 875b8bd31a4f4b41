"""Judge fair keys the way a user would: ``rota worker`` processes, a producer, the CLI.

``python -m bench.fair_checks [flood|weights ...]`` runs each check on a fresh private
redis-server with pools of ``rota worker tests.chaos.app:pool`` (each attempt of a job
appends start and done lines to a ledger file, counted after the run) and prints its
figures (bench.fair measures what fair keys cost instead):

- **flood**: one key with ``--flood`` jobs (100,000) queued, the pools (``--pools`` of
  ``--concurrency``: 20 workers) running them, then 1,000 keys with 10 jobs each: how
  long after its enqueue each small key's first job started, and whether all of the
  small keys' jobs finished while the flood was still running (flood jobs started after
  the last of them).
- **weights**: three keys of weights 1, 2 and 4 (``rota keys weight``), each with more
  jobs than the window can run: each key's share of the starts over a window in which
  all three have jobs queued, against 1/7, 2/7, 4/7. The limit of the ledger's other
  check (a key's limit under SIGKILL) is tests/chaos/test_fair_kill9.py.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import redis
from tests.chaos.harness import Fleet, Ledger, poll
from tests.redis_server import RedisServer

from bench.judge import rota_cli, run_checks, say
from rota import Client, JobSpec

NS = "fairjudge"


@contextmanager
def server_and_fleet() -> Iterator[tuple[RedisServer, Fleet, Ledger]]:
    with tempfile.TemporaryDirectory(prefix="rota-fair-") as tmp, RedisServer() as server:
        ledger = Ledger(Path(tmp) / "ledger.txt")
        fleet = Fleet(Path(tmp), ledger)
        try:
            yield server, fleet, ledger
        finally:
            fleet.close()


def processed(r: redis.Redis, namespace: str) -> int:
    """Jobs complete so far in the namespace (one shard: whatever ROTA_TEST_SHARDS says)."""
    return int(r.hget("{" + namespace + "}:stats", "processed") or 0)


def start_pools(fleet: Fleet, url: str, pools: int, concurrency: int) -> None:
    for _ in range(pools):
        # keep_result 0: the flood's records do not stay in memory
        fleet.start(url, NS, shards=1, concurrency=concurrency, keep_result=0, keep_none=0)
    poll(lambda: all(w.up_at for w in fleet.alive), 60, "pools started", fleet.tails)


def enqueue(url: str, specs: list[JobSpec], chunk: int = 5000) -> tuple[list[str], list[float]]:
    """The ids, and for each the time just before the call that sent it."""

    async def run() -> tuple[list[str], list[float]]:
        ids: list[str] = []
        sent: list[float] = []
        async with Client.from_url(url, NS) as client:
            for i in range(0, len(specs), chunk):
                part = specs[i : i + chunk]
                t = time.time()
                ids += [j.id for j in await client.enqueue_many(part)]
                sent += [t] * len(part)
        return ids, sent

    return anyio.run(run)


def check_flood(flood: int, keys: int, each: int, pools: int, concurrency: int) -> dict[str, Any]:
    with server_and_fleet() as (server, fleet, ledger):
        url = server.url
        began = time.time()
        enqueue(url, [JobSpec(name="work", kwargs={"ms": 2}, fair_key="flood")] * flood)
        say(f"flood of {flood} enqueued in {time.time() - began:.1f} s")
        start_pools(fleet, url, pools, concurrency)
        r = server.client()
        poll(lambda: processed(r, NS) >= 2000, 60, "the flood running", fleet.tails)
        small = [
            JobSpec(name="work", kwargs={"ms": 2}, fair_key=f"small-{k}")
            for k in range(keys)
            for _ in range(each)
        ]
        ids, sent = enqueue(url, small, chunk=10 * each)  # ten keys a call
        say(f"{len(ids)} small-key jobs enqueued in {time.time() - sent[0]:.1f} s")
        key_of = dict(zip(ids, (s.fair_key for s in small), strict=True))
        sent_at = dict(zip(ids, sent, strict=True))
        poll(lambda: processed(r, NS) >= flood + len(ids), 600, "every job done", every=0.5)
        entries = ledger.entries()
        first: dict[str, float] = {}
        enqueued: dict[str, float] = {}
        last_small_done = 0.0
        for e in entries:
            key = key_of.get(e.job_id)
            if key is None:
                continue
            if e.kind == "start" and key not in first:
                first[key] = e.t
                enqueued[key] = sent_at[e.job_id]
            if e.kind == "done":
                last_small_done = max(last_small_done, e.t)
        waits = sorted(first[k] - enqueued[k] for k in first)
        flood_after = sum(
            1
            for e in entries
            if e.kind == "start" and e.job_id not in key_of and e.t > last_small_done
        )
        flood_ends = max(e.t for e in entries if e.kind == "done" and e.job_id not in key_of)
        starts = Counter(e.job_id for e in entries if e.kind == "start")
        return {
            "small keys that started": len(first),
            "first start after enqueue (s): median": round(statistics.median(waits), 3),
            "p99": round(waits[int(0.99 * (len(waits) - 1))], 3),
            "max": round(waits[-1], 3),
            "keys over 2 s": sum(1 for w in waits if w > 2),
            "all small-key jobs done after the first small enqueue (s)": round(
                last_small_done - sent[0], 2
            ),
            "flood jobs started after the last small job ended": flood_after,
            "flood ended after the last small job (s)": round(flood_ends - last_small_done, 2),
            "jobs run twice": sum(1 for n in starts.values() if n > 1),
        }


def check_weights(per_key: int, window: float, pools: int, concurrency: int) -> dict[str, Any]:
    weights = {"w1": 1, "w2": 2, "w4": 4}
    with server_and_fleet() as (server, fleet, ledger):
        url = server.url
        for key, w in weights.items():
            rota_cli(url, NS, "keys", "weight", "work", key, str(w))
        specs = [
            JobSpec(name="work", kwargs={"ms": 20}, fair_key=k)
            for _ in range(per_key)
            for k in weights
        ]
        ids, _ = enqueue(url, specs)
        key_of = dict(zip(ids, (s.fair_key for s in specs), strict=True))
        start_pools(fleet, url, pools, concurrency)
        r = server.client()
        poll(lambda: processed(r, NS) >= 200, 60, "the keys running", fleet.tails)
        opened = time.time()
        time.sleep(window)
        closed = time.time()
        fleet.close()
        starts = [e for e in ledger.entries() if e.kind == "start"]
        # A key with fewer starts by the window's end than jobs still had some queued.
        began = Counter(key_of[e.job_id] for e in starts if e.t <= closed)
        counts = Counter(key_of[e.job_id] for e in starts if opened <= e.t <= closed)
        total = sum(counts.values())
        out: dict[str, Any] = {
            "starts in the window": total,
            "window (s)": round(closed - opened, 1),
        }
        for key, w in weights.items():
            share, want = counts[key] / total, w / sum(weights.values())
            out[f"{key}: share"] = (
                f"{share:.4f} (want {want:.4f}, off {100 * (share - want) / want:+.2f} %)"
            )
            out[f"{key}: jobs left queued at the window's end"] = per_key - began[key]
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_checks", description=__doc__)
    parser.add_argument("checks", nargs="*", default=["flood", "weights"])
    parser.add_argument("--flood", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--each", type=int, default=10)
    parser.add_argument("--pools", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--per-key", type=int, default=10_000, help="weights: jobs of each key")
    parser.add_argument("--window", type=float, default=10.0, help="weights: seconds counted")
    args = parser.parse_args(argv)
    return run_checks(
        parser,
        args.checks,
        {
            "flood": lambda: check_flood(
                args.flood, args.keys, args.each, args.pools, args.concurrency
            ),
            "weights": lambda: check_weights(
                args.per_key, args.window, args.pools, args.concurrency
            ),
        },
    )


if __name__ == "__main__":
    raise SystemExit(main())
