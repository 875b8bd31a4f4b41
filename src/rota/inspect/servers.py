"""The servers a namespace is on: whether they answer, their figures, and what each
shard holds (its tag, slot, server and sizes).

One shard is one server; a namespace over several shards (see
:mod:`rota.protocol.shards`) may be on as many servers as there are shards (a cluster),
or all on one. The web UI, ``/metrics`` and the CLI read these here.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec
from msgspec import Meta

from rota.client import admin_servers
from rota.client.rules import gather
from rota.errors import RedisRefused, RedisUnavailable, redis_cause
from rota.redis.outage import REDIS_ERRORS, Condition, guarded, out_of_memory, rota_error
from rota.wire.redispy import ReplyError, key_slot

if TYPE_CHECKING:
    from rota.client import Client
    from rota.client.shard import Shard

__all__ = [
    "INFO_FIELDS",
    "RedisFigures",
    "ServerInfo",
    "ShardView",
    "away_cause",
    "away_line",
    "backlog",
    "ping",
    "redis_figures",
    "server_info",
    "shard_views",
    "shards_away",
]

#: What INFO figures a server view keeps.
INFO_FIELDS: Final = (
    "redis_version",
    "valkey_version",
    "redis_mode",
    "os",
    "uptime_in_seconds",
    "connected_clients",
    "blocked_clients",
    "used_memory",
    "used_memory_human",
    "used_memory_peak_human",
    "maxmemory",
    "maxmemory_policy",
    "instantaneous_ops_per_sec",
    "total_commands_processed",
    "keyspace_hits",
    "keyspace_misses",
    "role",
)


class RedisFigures(msgspec.Struct, frozen=True):
    """What ``INFO memory`` and ``INFO replication`` say about refusing writes."""

    used_memory: int
    maxmemory: int  # 0: no limit
    refusing: frozenset[Condition]


class ServerInfo(msgspec.Struct):
    """The round trip of one PING (ms) and the figures of :data:`INFO_FIELDS`."""

    ping_ms: Annotated[float, Meta(description="round trip of a PING from the web server")]
    info: dict[str, Any]


class ShardView(msgspec.Struct, kw_only=True):
    """One shard of the namespace: where it lives and what it holds."""

    shard: Annotated[int, Meta(description="its number, 0 to the shard count - 1")]
    tag: Annotated[str, Meta(description="the hash tag of its keys, braces included")]
    slot: Annotated[int, Meta(description="the cluster hash slot of its keys")]
    server: Annotated[
        str, Meta(description="host:port of the server it is on ('?': not known yet)")
    ]
    queued: int
    running: int
    scheduled: int
    retry: int
    dead: int
    waiting: int
    away: Annotated[
        str,
        Meta(
            description="why its server cannot be read now ('' when it answers): its"
            " figures read 0 meanwhile, and the other shards are shown as they are"
        ),
    ] = ""


@guarded
async def shard_views(client: Client) -> list[ShardView]:
    """Every shard of the namespace, in order: its tag, slot, server, and its jobs
    queued and running (over every job name) and in each set. One shard is the
    namespace's whole. The shards are read at once; one whose server cannot be reached
    now (or refuses for a while) is shown away, with why, beside the others."""
    shards = client.admin.shards
    return await gather([functools.partial(_shard_view, shard) for shard in shards])


async def _shard_view(shard: Shard) -> ShardView:
    """One shard's view: its sets' sizes, and its queued and running jobs counted over
    the names it holds (its own ``Keys.names``: an enqueue into a shard adds the name
    there), in two round trips whatever the number of names (see
    :meth:`Shard.backlog_total`), not every figure of its queues nor every name of the
    namespace; a shard whose server cannot be read now is shown away, with why."""
    sizes: dict[str, int] = {}
    queued = running = 0
    away = ""
    try:
        sizes = await shard.job_set_sizes()  # its own, not the namespace's
        queued, running = await shard.backlog_total()
    except REDIS_ERRORS as exc:
        away = away_cause(exc) or ""
        if not away:
            raise
    number, prefix, server = admin_servers.shard_place(shard)  # prefix: "{tag}:"
    return ShardView(
        shard=number,
        tag=prefix[:-1],
        slot=key_slot(prefix.encode()),
        server=server,
        queued=queued,
        running=running,
        scheduled=sizes.get("scheduled", 0),
        retry=sizes.get("retry", 0),
        dead=sizes.get("dead", 0),
        waiting=sizes.get("waiting", 0),
        away=away,
    )


def away_cause(exc: BaseException) -> str | None:
    """Why a shard's server cannot be read now, for ``exc`` it raised (redis-py's or
    rota's): it cannot be reached, or refuses for a while (loading, a failover...);
    None for any other error (a refusal that lasts, a bug)."""
    mine = rota_error(exc)
    if isinstance(mine, RedisUnavailable) or (isinstance(mine, RedisRefused) and mine.condition):
        return str(redis_cause(mine)) or str(mine)
    return None


async def shards_away(client: Client) -> dict[int, str]:
    """The shards of ``client``'s namespace whose server does not answer a PING now
    (all asked at once), each with why (see :func:`away_cause`): what a command that
    needs every shard names when it cannot be served."""

    async def probe(shard: Shard) -> str | None:
        try:
            await admin_servers.ping_shard(shard)
        except REDIS_ERRORS as exc:
            return away_cause(exc)  # None: it answered, with a refusal of its own
        return None

    found = await gather([functools.partial(probe, shard) for shard in client.admin.shards])
    return {i: why for i, why in enumerate(found) if why is not None}


def away_line(client: Client, away: dict[int, str]) -> str:
    """One line naming the shards away (of :func:`shards_away`) and why."""
    which = ", ".join(map(str, away))
    first = next(iter(away.values()))
    left = len(client.admin.shards) - len(away)
    return (
        f"shard{'s' if len(away) > 1 else ''} {which} of namespace {client.namespace!r}"
        f" cannot be read now ({first}); the other {left} of {len(client.admin.shards)} answer:"
        " try again when it is back"
    )


async def backlog(client: Client, names: list[str]) -> dict[str, tuple[int, int]]:
    """Queued and running jobs of each name over every shard (the shards read at once,
    one call each, see :meth:`Shard.backlog`): what ``/metrics`` ranks the names by."""
    out = dict.fromkeys(names, (0, 0))
    each = [functools.partial(s.backlog, names) for s in client.admin.shards]
    for counts in await gather(each):
        for name, (queued, running) in counts.items():
            out[name] = (out[name][0] + queued, out[name][1] + running)
    return out


@guarded
async def ping(client: Client) -> float:
    """The round trip of one PING, in seconds: whether Redis answers, and how fast.
    Over several shards, the slowest of a PING to each shard's server (all at once):
    the namespace answers when every shard does."""
    each = admin_servers.one_per_server(client)
    return max(await gather([functools.partial(admin_servers.ping_shard, s) for s in each]))


@guarded
async def server_info(client: Client) -> ServerInfo:
    """Server figures from INFO and the round trip of one PING, measured here: of the
    server of the namespace's first shard (see :func:`shard_views` for every shard's)."""
    ping_ms = await ping(client) * 1000
    info = await admin_servers.info(client)
    fields: dict[str, Any] = {k: info[k] for k in INFO_FIELDS if k in info}
    for k in ("redis_version", "valkey_version", "used_memory_human", "maxmemory_policy", "os"):
        if k in fields:
            fields[k] = str(fields[k])
    return ServerInfo(round(ping_ms, 3), fields)


@guarded
async def redis_figures(client: Client) -> RedisFigures | None:
    """Redis's memory figures and the writes it refuses, in one round trip; None when
    Redis refuses ``INFO`` (an ACL without it). INFO runs on a full Redis and on a
    replica. Over several shards, of every server they are on: memory added up,
    every refusal of any."""
    each = await gather(
        [functools.partial(_figures, s) for s in admin_servers.one_per_server(client)]
    )
    if any(f is None for f in each):
        return None
    found = [f for f in each if f is not None]
    if len(found) == 1:
        return found[0]
    return RedisFigures(
        sum(f.used_memory for f in found),
        0 if any(f.maxmemory == 0 for f in found) else sum(f.maxmemory for f in found),
        frozenset().union(*(f.refusing for f in found)),
    )


async def _figures(shard: Shard) -> RedisFigures | None:
    """:func:`redis_figures` of one server."""
    memory, replication = await admin_servers.memory_and_role(shard)
    if isinstance(memory, ReplyError) or isinstance(replication, ReplyError):
        return None
    refusing: set[Condition] = set()
    if out_of_memory(memory):
        refusing.add(Condition.OUT_OF_MEMORY)
    if replication.get("role") == "slave":  # (replica-read-only, the default, assumed)
        refusing.add(Condition.READ_ONLY)
    used, limit = int(memory.get("used_memory", 0)), int(memory.get("maxmemory", 0))
    return RedisFigures(used, limit, frozenset(refusing))
