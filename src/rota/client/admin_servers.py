"""The operator's reads of the servers a namespace is on, by name (see
:mod:`rota.client.admin_reads` for why they are named): where each shard lives, whether its
server answers, its figures, and the shard count the namespace recorded.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rota.client.rules import recorded_shards
from rota.client.shard import Shard
from rota.redis.topology import owner_lost, server_of

if TYPE_CHECKING:
    from rota.client import Client

__all__ = [
    "info",
    "lost_owner",
    "memory_and_role",
    "one_per_server",
    "ping_shard",
    "recorded_shard_count",
    "shard_place",
]


def shard_place(shard: Shard) -> tuple[int, str, str]:
    """A shard's number, the prefix of its keys (``"{tag}:"``) and its server
    (``host:port``; ``"?"`` while not located yet), without a read."""
    return shard.keys.shard, shard.keys.prefix, server_of(shard.redis)


async def ping_shard(shard: Shard) -> float:
    """The round trip of one PING to a shard's server, in seconds."""
    started = time.perf_counter()
    await shard.redis.ping()
    return time.perf_counter() - started


def one_per_server(client: Client) -> list[Shard]:
    """One shard per server the namespace's shards are on: in a cluster the shards
    spread over the nodes, on one server they share it. A shard whose server is not
    located yet ("?") counts as a server of its own."""
    first: dict[object, Shard] = {}
    for shard in client.admin.shards:
        where = server_of(shard.redis)
        first.setdefault(where if where != "?" else id(shard), shard)
    return list(first.values())


async def info(client: Client) -> dict[str, Any]:
    """``INFO`` of the server of the namespace's first shard."""
    return dict(await client.admin.shards[0].redis.info())


async def memory_and_role(shard: Shard) -> tuple[Any, Any]:
    """``INFO memory`` and ``INFO replication`` of a shard's server, in one round trip
    (an error reply in place of a refused one)."""
    read = lambda p: (p.info("memory"), p.info("replication"))  # noqa: E731
    memory, replication = await shard.piped(read, errors=False)
    return memory, replication


async def recorded_shard_count(client: Client) -> int | None:
    """How many shards the namespace spans, as its first pool recorded it (see
    :func:`rota.client.rules.recorded_shards`); redis-py's errors, unguarded."""
    first = client.admin.shards[0]
    return await recorded_shards(first.redis, first.keys)


def lost_owner(client: Client) -> str | None:
    """In a cluster, the primary of the first shard's slot, found unreachable since the
    cluster named it (see :func:`rota.redis.topology.owner_lost`)."""
    return owner_lost(client.admin.shards[0].redis)
