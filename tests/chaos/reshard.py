"""What the chaos tests of a change of the shard count share: a namespace whose change
retires a shard, ids of a chosen shard, a pool's liveness, what a retired tag holds."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import cast

import redis

from rota import Client
from rota.protocol.shards import shard_of, shard_tags
from tests.chaos.harness import Ledger

__all__ = ["ids_in", "ran_once_or_after_a_kill", "retiring", "say", "tag_keys", "up"]


def say(line: str) -> None:
    sys.stdout.write(f"resize: {line}\n")


def retiring(namespace: str, old: int, new: int) -> tuple[str, str]:
    """A namespace (``namespace`` with letters added) whose change from ``old`` to
    ``new`` shards retires a shard, and the tag of the first one retired."""
    while True:
        gone = [t for t in shard_tags(namespace, old) if t not in shard_tags(namespace, new)]
        if gone:
            return namespace, gone[0]
        namespace += "x"


def ids_in(namespace: str, tag: str, shards: int, n: int, prefix: str) -> list[str]:
    """``n`` job ids whose route under ``shards`` shards is the shard of ``tag``."""
    at = shard_tags(namespace, shards).index(tag)
    out: list[str] = []
    i = 0
    while len(out) < n:
        if shard_of(f"{prefix}{i}", shards) == at:
            out.append(f"{prefix}{i}")
        i += 1
    return out


def tag_keys(r: redis.Redis, tag: str) -> set[str]:
    """Every key under ``tag`` but its record (a SCAN: a test may)."""
    found = {k.decode() for k in r.scan_iter(match=f"{{{tag}}}:*", count=1000)}
    return found - {f"{{{tag}}}:shards"}


def up(r: redis.Redis, namespace: str) -> int:
    """The pools whose heartbeat runs in shard 0 of ``namespace`` and is alive."""
    ids = cast(list[bytes], r.zrange(f"{{{namespace}}}:pools", 0, -1))
    return sum(1 for p in ids if r.exists(f"{{{namespace}}}:pool:{p.decode()}") == 1)


async def ran_once_or_after_a_kill(
    op: Client,
    ledger: Ledger,
    ids: Iterable[str],
    killed: set[int],
    outages: Sequence[tuple[float, float]] = (),
) -> tuple[list[str], int]:
    """The jobs of ``ids`` not complete or with no done line (lost), and the runs beyond
    the first of each. A job run twice must have had its earlier run in a pool that was
    killed (``killed``: pids) or cut off from Redis (running during one of ``outages``,
    from the kill of the server to its start again, epoch seconds): the causes of a
    second run the docs name."""
    starts, dones = ledger.by_job("start"), ledger.by_job("done")
    lost, again = [], 0
    for job_id in ids:
        job = await op.job(job_id)
        if job is None or job.state != "complete" or not dones.get(job_id):
            lost.append(job_id)
        runs = starts.get(job_id, [])
        for first in runs[:-1]:
            end = next((d.t for d in dones.get(job_id, []) if d.attempt == first.attempt), None)
            cut = any(first.t <= back and (end is None or end >= down) for down, back in outages)
            assert first.pid in killed or cut, (job_id, runs)
        again += max(0, len(runs) - 1)
    return lost, again
