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

``--cluster`` runs the same on a local cluster of three primaries (no replicas, made by
``redis-cli --cluster create``, as the topology tests make theirs): the commands are
those of every primary added up, and ``waits`` is the most connections one primary
holds blocked in a ``BLPOP`` of the pool, sampled from ``CLIENT LIST`` at the window's
end (a pool's waits on wake lists; see docs/protocol.md, "Wake lists").
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
from tests.topology_servers import ClusterGroup

from bench.redis_server import RedisServer
from rota import WorkerPool
from rota.config import Settings

__all__ = ["Servers", "idle_cost"]


class Servers:
    """One server, or the primaries of a local cluster, read as one."""

    def __init__(self, servers: list[RedisServer], url: str) -> None:
        self.servers = servers
        self.url = url

    @classmethod
    def start(cls, stack: contextlib.ExitStack, *, cluster: bool) -> Servers:
        """A private server, or a cluster of three primaries, stopped with ``stack``."""
        if cluster:
            group = stack.enter_context(ClusterGroup(replicas=0))
            return cls(list(group.servers), group.url)
        one = stack.enter_context(RedisServer())
        return cls([one], one.url)

    def calls(self) -> dict[str, int]:
        """Each command's calls so far, every server's added up."""
        total: Counter[str] = Counter()
        for server in self.servers:
            client = Redis.from_url(server.url)
            try:
                stats = client.info("commandstats")
            finally:
                client.close()
            total.update({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})
        return dict(total)

    def waits(self) -> int:
        """The most connections one server holds blocked in a BLPOP."""
        most = 0
        for server in self.servers:
            client = Redis.from_url(server.url)
            try:
                listed = client.client_list()
            finally:
                client.close()
            most = max(most, sum(1 for c in listed if c.get("cmd") == "blpop"))
        return most


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


def _monitor(server: Servers, namespace: str, seen: Counter[str], stop: threading.Event) -> None:
    client = Redis.from_url(server.servers[0].url)
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
    server: Servers, shards: int, seconds: float, pools: int, by_command: bool = False
) -> dict[str, Any]:
    """Commands per second Redis runs for ``pools`` idle pools over ``shards`` shards
    (with ``by_command``, under ``"sent"`` those MONITOR saw, by command; in a cluster,
    the first primary's only)."""
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
        before, t0 = server.calls(), time.monotonic()
        await asyncio.sleep(seconds)
        after, t1 = server.calls(), time.monotonic()
        waits = server.waits()
        stop.set()
    spent = {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}
    spent = {k: v for k, v in spent.items() if v > 0 and k not in ("info", "client|list")}
    got: dict[str, Any] = {"total": sum(spent.values()), "waits": waits}
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
    parser.add_argument("--cluster", action="store_true", help="three primaries of a cluster")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        servers = Servers.start(stack, cluster=args.cluster)
        for k in args.shards:
            got = asyncio.run(idle_cost(servers, k, args.seconds, args.pools, args.by_command))
            sent = got.pop("sent", {})
            waits = got.pop("waits")
            parts = ", ".join(f"{name} {v:.2f}" for name, v in list(got.items())[1:8])
            sys.stdout.write(
                f"K={k} pools={args.pools}: {got['total']:.2f} commands/s,"
                f" {waits} BLPOP waits on the busiest server ({parts})\n"
            )
            for name, v in sent.items():
                sys.stdout.write(f"  {v:7.2f}  {name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
