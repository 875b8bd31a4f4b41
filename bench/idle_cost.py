"""What an idle pool costs Redis: commands per second, by shard count.

``python -m bench.idle_cost --shards 1 12 --seconds 30`` starts a private redis-server,
runs one pool (c=10, default settings: heartbeat every 5 s, a fetcher's wait of 5 s)
over a namespace of K shards with nothing to do, and counts the commands Redis runs
(``INFO commandstats``, the scripts' inner commands included) after the pool's start,
for the time asked. A second pool beside the first shows what a pool that does not hold
the rebalancer's lease costs (``--pools 2``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid

from redis import Redis

from bench.redis_server import RedisServer
from rota import WorkerPool
from rota.config import Settings

__all__ = ["idle_cost"]


def _calls(server: RedisServer) -> dict[str, int]:
    client = Redis.from_url(server.url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def idle_cost(
    server: RedisServer, shards: int, seconds: float, pools: int
) -> dict[str, float]:
    """Commands per second Redis runs for ``pools`` idle pools over ``shards`` shards."""
    namespace = "idle" + uuid.uuid4().hex[:8]
    settings = Settings(redis_url=server.url, namespace=namespace, shards=shards, concurrency=10)
    made = [WorkerPool(settings=settings) for _ in range(pools)]
    for pool in made:
        pool.job(name="nothing", max_concurrency=24)(_nothing)
    async with contextlib.AsyncExitStack() as stack:
        for pool in made:
            await stack.enter_async_context(pool.running())
        await asyncio.sleep(2)  # past the start
        before, t0 = _calls(server), time.monotonic()
        await asyncio.sleep(seconds)
        after, t1 = _calls(server), time.monotonic()
    spent = {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}
    spent = {k: v for k, v in spent.items() if v > 0 and k not in ("info",)}
    return {"total": sum(spent.values()), **dict(sorted(spent.items(), key=lambda kv: -kv[1]))}


async def _nothing(ctx: object) -> None:
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 12])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--pools", type=int, default=1)
    args = parser.parse_args(argv)
    with RedisServer() as server:
        for k in args.shards:
            got = asyncio.run(idle_cost(server, k, args.seconds, args.pools))
            parts = ", ".join(f"{name} {v:.2f}" for name, v in list(got.items())[1:8])
            sys.stdout.write(f"K={k} pools={args.pools}: {got['total']:.2f} commands/s ({parts})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
