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
those of every primary added up.

Each K also prints, from ``MONITOR`` on every primary over the same window, the
commands the pool sent (``sent``: what a client puts on the wire, a script or function
call counting one) apart from those run inside scripts and functions (``inner``:
MONITOR tags them ``lua``), in all and on the busiest primary; and from ``CLIENT LIST``
at the window's end, on each primary, the pool's connections (every one but the
bench's own), those subscribed to shard channels (``SSUBSCRIBE``: the wake waits, see
docs/protocol.md, "Wake lists"), to classic channels (``SUBSCRIBE``: the abort and
command listeners) and blocked in a ``BLPOP``.
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
from collections.abc import Callable
from typing import Any, TypeVar

from redis import Redis
from tests.topology_servers import ClusterGroup

from bench import positive_int, positive_seconds
from bench.redis_server import RedisServer
from rota import WorkerPool
from rota.config import Settings

__all__ = ["Servers", "idle_cost"]

T = TypeVar("T")


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

    def _each(self, read: Callable[[Redis], T]) -> list[T]:
        """``read`` of each server, on a connection of its own closed after."""
        out = []
        for server in self.servers:
            client = Redis.from_url(server.url)
            try:
                out.append(read(client))
            finally:
                client.close()
        return out

    def calls(self) -> dict[str, int]:
        """Each command's calls so far, every server's added up."""
        total: Counter[str] = Counter()
        for stats in self._each(lambda r: r.info("commandstats")):
            total.update({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})
        return dict(total)

    def ping(self) -> None:
        self._each(Redis.ping)

    def connections(self) -> list[dict[str, int]]:
        """Each server's connections but the bench's own (its MONITORs and this read):
        in all, subscribed to shard channels, to classic channels, blocked in a BLPOP."""
        each = []
        for listed in self._each(Redis.client_list):
            pool = [c for c in listed if c.get("cmd") not in ("monitor", "client|list")]
            each.append(
                {
                    "all": len(pool),
                    "ssub": sum(1 for c in pool if int(c.get("ssub", 0)) > 0),
                    "sub": sum(1 for c in pool if int(c.get("sub", 0)) > 0),
                    "blpop": sum(1 for c in pool if c.get("cmd") == "blpop"),
                }
            )
        return each


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


#: The bench's own commands, left out of MONITOR's counts.
_OWN = ("INFO", "CLIENT")


def _monitor(
    url: str, namespace: str, seen: Counter[str], started: threading.Event, stop: threading.Event
) -> None:
    client = Redis.from_url(url)
    try:
        with client.monitor() as monitor:  # type: ignore[no-untyped-call]
            started.set()
            for event in monitor.listen():
                if stop.is_set():
                    break
                command = str(event["command"])
                if command.partition(" ")[0].strip('"').upper() in _OWN:
                    continue
                kind = _kind(command, namespace)
                seen[("lua " if event.get("client_type") == "lua" else "") + kind] += 1
    finally:
        client.close()


async def idle_cost(
    server: Servers, shards: int, seconds: float, pools: int, by_command: bool = False
) -> dict[str, Any]:
    """Commands per second Redis runs for ``pools`` idle pools over ``shards`` shards
    (``INFO commandstats``), and by MONITOR on every server those the pools sent and
    those run inside scripts (``sent``/``inner``, in all and per server), with the
    pools' connections per server (``connections``); with ``by_command``, under
    ``"commands"`` those MONITOR saw by command, every server's added up."""
    namespace = "idle" + uuid.uuid4().hex[:8]
    settings = Settings(redis_url=server.url, namespace=namespace, shards=shards, concurrency=10)
    made = [WorkerPool(settings=settings) for _ in range(pools)]
    for pool in made:
        pool.job(name="nothing", max_concurrency=24)(_nothing)
    async with contextlib.AsyncExitStack() as stack:
        for pool in made:
            await stack.enter_async_context(pool.running())
        await asyncio.sleep(2)  # past the start
        seen: list[Counter[str]] = [Counter() for _ in server.servers]
        stop = threading.Event()
        watchers = []
        for one, into in zip(server.servers, seen, strict=True):
            started = threading.Event()
            watcher = threading.Thread(
                target=_monitor, args=(one.url, namespace, into, started, stop)
            )
            watcher.start()
            await asyncio.to_thread(started.wait, 5)
            watchers.append(watcher)
        before, t0 = server.calls(), time.monotonic()
        await asyncio.sleep(seconds)
        after, t1 = server.calls(), time.monotonic()
        stop.set()
        connections = server.connections()
        server.ping()  # a command on each server, that its MONITOR ends at
    for watcher in watchers:
        await asyncio.to_thread(watcher.join, 5)  # it ends at the next command it sees
    span = t1 - t0
    spent = {k: (after[k] - before.get(k, 0)) / span for k in after}
    spent = {k: v for k, v in spent.items() if v > 0 and k not in ("info", "client|list")}
    sent = [sum(n for k, n in c.items() if not k.startswith("lua ")) / span for c in seen]
    inner = [sum(n for k, n in c.items() if k.startswith("lua ")) / span for c in seen]
    got: dict[str, Any] = {
        "total": sum(spent.values()),
        "sent": sent,
        "inner": inner,
        "connections": connections,
    }
    got.update(sorted(spent.items(), key=lambda kv: -kv[1]))
    if by_command:
        every = sum(seen, Counter())
        got["commands"] = {k: n / span for k, n in every.most_common()}
    return got


async def _nothing(ctx: object) -> None:
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__)
    parser.add_argument("--shards", type=positive_int, nargs="+", default=[1, 12])
    parser.add_argument("--seconds", type=positive_seconds, default=30.0)
    parser.add_argument("--pools", type=positive_int, default=1)
    parser.add_argument("--by-command", action="store_true", help="MONITOR's count by command")
    parser.add_argument("--cluster", action="store_true", help="three primaries of a cluster")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        servers = Servers.start(stack, cluster=args.cluster)
        for k in args.shards:
            got = asyncio.run(idle_cost(servers, k, args.seconds, args.pools, args.by_command))
            commands = got.pop("commands", {})
            sent, inner, connections = got.pop("sent"), got.pop("inner"), got.pop("connections")
            parts = ", ".join(f"{name} {v:.2f}" for name, v in list(got.items())[1:8])
            each = " ".join(
                f"{c['all']}({c['ssub']} ssub, {c['sub']} sub, {c['blpop']} blpop)"
                for c in connections
            )
            sys.stdout.write(
                f"K={k} pools={args.pools}: {got['total']:.2f} commands/s;"
                f" sent {sum(sent):.2f} (busiest server {max(sent):.2f}),"
                f" inner {sum(inner):.2f} (busiest {max(inner):.2f});"
                f" connections per server {each} ({parts})\n"
            )
            for name, v in commands.items():
                sys.stdout.write(f"  {v:7.2f}  {name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
