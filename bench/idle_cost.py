"""What an idle pool costs Redis: commands per second, by shard count.

``python -m bench.idle_cost --shards 1 12 --seconds 30`` starts a private redis-server,
runs one pool (c=10, default settings: heartbeat every 5 s, a fetcher's wait of 5 s)
over a namespace of K shards with nothing to do, and counts the commands Redis runs
(``INFO commandstats``, the scripts' inner commands included) after the pool's start,
for the time asked. A second pool beside the first shows what a pool that does not hold
the rebalancer's lease costs (``--pools 2``). ``--by-command`` also prints, from
``MONITOR`` over the same window, each command a second as clients sent it (a script
call by its function's name, a key command by its key's kind) and as scripts ran it
(``lua``): what tells the pool's loops apart (docs/performance.md, "What an idle pool
costs").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any

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


def _kind(command: str, namespace: str) -> str:
    """A MONITOR line's command, named as ``--by-command`` counts it: FCALL with its
    function, a command on one key with what follows the key's shard tag."""
    parts = [p.strip('"') for p in command.split(" ")]
    name = parts[0].upper()
    if name == "FCALL" and len(parts) > 1:
        return f"FCALL {parts[1].rpartition('_')[2]}"
    if len(parts) > 1 and namespace in parts[1]:
        key = parts[1].partition("}")[2] or parts[1].removeprefix(namespace)
        return f"{name} {key.split(':')[1] if ':' in key else key}"
    return name


def _monitor(
    server: RedisServer, namespace: str, seen: Counter[str], stop: threading.Event
) -> None:
    client = Redis.from_url(server.url)
    try:
        with client.monitor() as monitor:  # type: ignore[no-untyped-call]
            for event in monitor.listen():
                if stop.is_set():
                    break
                kind = _kind(str(event["command"]), namespace)
                seen[("lua " if event.get("client_type") == "lua" else "") + kind] += 1
    finally:
        client.close()


async def idle_cost(
    server: RedisServer, shards: int, seconds: float, pools: int, by_command: bool = False
) -> dict[str, Any]:
    """Commands per second Redis runs for ``pools`` idle pools over ``shards`` shards
    (with ``by_command``, under ``"sent"`` those MONITOR saw, by command)."""
    namespace = "idle" + uuid.uuid4().hex[:8]
    settings = Settings(redis_url=server.url, namespace=namespace, shards=shards, concurrency=10)
    made = [WorkerPool(settings=settings) for _ in range(pools)]
    for pool in made:
        pool.job(name="nothing", max_concurrency=24)(_nothing)
    async with contextlib.AsyncExitStack() as stack:
        for pool in made:
            await stack.enter_async_context(pool.running())
        await asyncio.sleep(2)  # past the start
        seen: Counter[str] = Counter()
        stop = threading.Event()
        watcher = threading.Thread(target=_monitor, args=(server, namespace, seen, stop))
        if by_command:
            watcher.start()
        before, t0 = _calls(server), time.monotonic()
        await asyncio.sleep(seconds)
        after, t1 = _calls(server), time.monotonic()
        stop.set()
    spent = {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}
    spent = {k: v for k, v in spent.items() if v > 0 and k not in ("info",)}
    got: dict[str, Any] = {"total": sum(spent.values())}
    got.update(sorted(spent.items(), key=lambda kv: -kv[1]))
    if by_command:
        await asyncio.to_thread(watcher.join, 5)  # it ends at the next command it sees
        got["sent"] = {k: n / (t1 - t0) for k, n in seen.most_common()}
    return got


async def _nothing(ctx: object) -> None:
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 12])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--pools", type=int, default=1)
    parser.add_argument("--by-command", action="store_true", help="MONITOR's count by command")
    args = parser.parse_args(argv)
    with RedisServer() as server:
        for k in args.shards:
            got = asyncio.run(idle_cost(server, k, args.seconds, args.pools, args.by_command))
            sent = got.pop("sent", {})
            parts = ", ".join(f"{name} {v:.2f}" for name, v in list(got.items())[1:8])
            sys.stdout.write(f"K={k} pools={args.pools}: {got['total']:.2f} commands/s ({parts})\n")
            for name, v in sent.items():
                sys.stdout.write(f"  {v:7.2f}  {name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
