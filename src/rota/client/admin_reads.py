"""The operator's reads and writes of Redis, by name: what the read models of
:mod:`rota.inspect`, the web and the CLI ask of a namespace beyond the client's own
methods. Each takes one shard (a :class:`Shard`, from :func:`shards_of`) or the
client (its shards read and merged here), so that no module above the client layer
holds a Redis handle of the client. A caller's pipeline stays one pipeline here (the
web's cost tests count the round trips); the servers' reads are in
:mod:`rota.client.admin_servers`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rota.client.routing import Shards
from rota.client.workflow import (
    MISSING,
    RELATED_FIELDS,
    GroupProgress,
    Related,
    pipelined,
    read_related,
)
from rota.protocol.job import field_int, field_seconds, field_text, now_ms, reply_text

if TYPE_CHECKING:
    from rota.client import Client
    from rota.client.shard import Shard

__all__ = [
    "audit_page",
    "audit_push",
    "cron_rows",
    "cron_switch",
    "end_session",
    "flow_rows",
    "forget_namespace",
    "group_head",
    "group_links",
    "group_shard",
    "job_and_ties",
    "leased_names",
    "member_rows",
    "queue_rows",
    "queue_totals",
    "related_rows",
    "session_ended",
    "stats_fields",
]

T = TypeVar("T")


def group_shard(client: Client, group_id: str) -> Shard:
    """The shard that holds group ``group_id``, its members and its callback: the one
    its id names (see :mod:`rota.protocol.shards`)."""
    return Shards(client.admin.shards).named(group_id)


def _each(client: Client, call: Callable[[Shard], Awaitable[T]]) -> Awaitable[list[T]]:
    """``call`` on every shard of ``client``'s namespace at once, in shard order."""
    return Shards(client.admin.shards).each(call)


# -- a job, a group, a flow ------------------------------------------------------------


async def job_and_ties(shard: Shard, job_id: str) -> tuple[Any, Any, Any]:
    """A job's record (its hash), log lines and children, in one round trip."""
    k = shard.keys
    pipe = shard.redis.pipeline(transaction=False)
    pipe.hgetall(k.job(job_id))
    pipe.lrange(k.joblog(job_id), 0, -1)
    pipe.smembers(k.children(job_id))
    h, logs, kids = (pipelined(v) for v in await pipe.execute(raise_on_error=False))
    return h, logs, kids


async def related_rows(shard: Shard, ids: list[str], group_id: str | None) -> list[Any]:
    """Each job's ``HMGET`` of ``RELATED_FIELDS``, then (with ``group_id``) the group's
    progress fields, in one round trip."""
    pipe = shard.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(shard.keys.job(i), *RELATED_FIELDS)
    if group_id:
        pipe.hmget(shard.keys.group(group_id), *GroupProgress.FIELDS)
    return list(await pipe.execute(raise_on_error=False))


async def group_head(shard: Shard, group_id: str, offset: int, limit: int) -> tuple[Any, list[str]]:
    """A group's progress fields and a page of its members' ids, in one round trip."""
    pipe = shard.redis.pipeline(transaction=False)
    pipe.hmget(shard.keys.group(group_id), *GroupProgress.FIELDS)
    pipe.lrange(shard.keys.group_members(group_id), offset, offset + limit - 1)
    raw, members = await pipe.execute(raise_on_error=False)
    return pipelined(raw), [reply_text(m) for m in pipelined(members) or ()]


async def member_rows(shard: Shard, group_id: str, offset: int, count: int) -> list[Related]:
    """:meth:`Shard.group_members`, then each one's name and state through the bare
    connection (cheap for thousands of commands): two round trips."""
    ids = await shard.group_members(group_id, offset, count)
    k = shard.keys
    rows = await shard.conn.execute_many([("HMGET", k.job(i), *RELATED_FIELDS) for i in ids])
    return list(map(read_related, ids, rows))


async def flow_rows(client: Client, ids: list[str]) -> list[tuple[Any, Any]]:
    """Each job's fields and children: read in the shard each id names (a pipeline
    each, at once), then in the shard that holds those not found there (an id a
    producer chose), as :meth:`Shards.related` reads."""
    return await Shards(client.admin.shards).related(
        ids, _flow_rows, lambda row: read_related("", row[0]).state == MISSING
    )


async def _flow_rows(shard: Shard, ids: list[str]) -> list[tuple[Any, Any]]:
    """:func:`flow_rows` of one shard."""
    pipe = shard.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(shard.keys.job(i), "name", "state", "after", "group", "waits_group")
        pipe.smembers(shard.keys.children(i))
    rows = await pipe.execute(raise_on_error=False)
    return list(zip(rows[0::2], rows[1::2], strict=True))


async def group_links(
    shard: Shard, wanted_then: list[str], wanted_members: list[str], limit: int
) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """The callbacks and (the first ``limit``) members of groups of one shard, in one
    round trip."""
    k = shard.keys
    pipe = shard.redis.pipeline(transaction=False)
    for g in wanted_then:
        pipe.hget(k.group(g), "then")
    for g in wanted_members:
        pipe.lrange(k.group_members(g), 0, limit - 1)
    answers = iter(await pipe.execute(raise_on_error=False))
    thens = {g: field_text(pipelined(next(answers))) or None for g in wanted_then}
    members = {g: [reply_text(m) for m in pipelined(next(answers)) or ()] for g in wanted_members}
    return thens, members


# -- queues and figures ----------------------------------------------------------------

#: A queued job as :func:`queue_rows` reads it: its id, name, state, enqueue time (ms),
#: the length of its args and the args (None when longer than asked for).
QueuedRow = tuple[str, Any, Any, Any, int, Any]


async def queue_rows(
    shard: Shard, name: str, offset: int, limit: int, newest: bool, longest: int
) -> tuple[int, bool, list[QueuedRow]]:
    """A page of the jobs waiting in ``name``'s queue of one shard (see
    :func:`rota.inspect.queue_view`), the queue's length and whether it is paused:
    one ``LRANGE`` counted from the end the page starts at, the page's fields and args'
    lengths, then the args up to ``longest`` bytes (three round trips)."""
    k = shard.keys
    pipe = shard.redis.pipeline(transaction=False)
    pipe.llen(k.queue(name))
    if newest:
        pipe.lrange(k.queue(name), offset, offset + limit - 1)
    else:
        pipe.lrange(k.queue(name), -offset - limit, -offset - 1)
    pipe.sismember(k.paused, name)
    total, raw, paused = await pipe.execute()
    ids = [reply_text(i) for i in (raw if newest else reversed(raw))]
    pipe = shard.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(k.job(i), "name", "state", "enqueued_at")
        pipe.hstrlen(k.job(i), "args")
    # A record that is no hash (written by others) answers errors: read as missing.
    rows = await pipe.execute(raise_on_error=False) if ids else []
    fields = [(None,) * 3 if isinstance(f, Exception) else f for f in rows[0::2]]
    sizes = [n if isinstance(n, int) else 0 for n in rows[1::2]]
    shown = [i for i, size in zip(ids, sizes, strict=True) if 0 < size <= longest]
    pipe = shard.redis.pipeline(transaction=False)
    for i in shown:
        pipe.hget(k.job(i), "args")
    args = dict(zip(shown, await pipe.execute() if shown else [], strict=True))
    jobs = [(i, *f, size, args.get(i)) for i, f, size in zip(ids, fields, sizes, strict=True)]
    return int(total), bool(paused), jobs


async def stats_fields(
    client: Client, buckets: list[str], fields: Sequence[str]
) -> list[list[int]]:
    """``fields`` of each stats bucket (``YYYYmmddHHMM`` or ``YYYYmmdd``), one HMGET
    each, added up over every shard (each counts the jobs it ran)."""
    each = await _each(client, lambda s: _fields(s, buckets, fields))
    return [[sum(vs) for vs in zip(*rows, strict=True)] for rows in zip(*each, strict=True)]


async def _fields(shard: Shard, buckets: list[str], fields: Sequence[str]) -> list[list[int]]:
    """:func:`stats_fields` of one shard."""
    pipe = shard.redis.pipeline(transaction=False)
    for bucket in buckets:
        pipe.hmget(shard.keys.stats_bucket(bucket), fields)
    rows = await pipe.execute() if buckets else []
    return [[field_int(v) for v in row] for row in rows]


async def leased_names(client: Client) -> list[str]:
    """The job names whose running set may hold leases (``Keys.leased``: the fetch that
    leases a job adds its name): the only running sets worth reading. Over every
    shard."""
    each = await _each(client, lambda s: s.redis.smembers(s.keys.leased))
    return sorted({reply_text(n) for names in each for n in names})


async def queue_totals(client: Client) -> tuple[int, int]:
    """Jobs queued, over every job name (one figure per name), and jobs running, over
    the names that may hold leases: added up over every shard."""
    names = await client.admin.names()
    each = await _each(client, lambda s: _totals(s, names))
    return sum(q for q, _ in each), sum(r for _, r in each)


async def _totals(shard: Shard, names: list[str]) -> tuple[int, int]:
    """:func:`queue_totals` of one shard, over the names its own running sets lease."""
    k = shard.keys
    leased = [reply_text(n) for n in await shard.redis.smembers(k.leased)]
    pipe = shard.redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(k.queue(name))
    for name in leased:
        pipe.zcard(k.running(name))
    counts = await pipe.execute() if names or leased else []
    return sum(counts[: len(names)]), sum(counts[len(names) :])


# -- the namespace's own records (on its first shard) ---------------------------------


async def cron_rows(client: Client) -> dict[str, float]:
    """The periodic jobs turned off: name -> since when (seconds; 0: unknown)."""
    first = client.admin.shards[0]
    raw = await first.redis.hgetall(first.keys.cron_off)
    return {reply_text(k): field_seconds(v) or 0.0 for k, v in raw.items()}


async def cron_switch(client: Client, name: str, on: bool) -> None:
    """Turn the periodic job ``name`` on (again) or off, on every pool."""
    first = client.admin.shards[0]
    if on:
        await first.redis.hdel(first.keys.cron_off, name)
    else:
        await first.redis.hset(first.keys.cron_off, name, now_ms())


async def session_ended(client: Client, sid: str) -> bool:
    """Whether the login ``sid`` was ended (a logout) before its signed end."""
    first = client.admin.shards[0]
    return await first.redis.zscore(first.keys.web_sessions_ended, sid) is not None


async def end_session(client: Client, sid: str, expires: int) -> None:
    """End the login ``sid`` (signed to end at ``expires``, epoch seconds): its id is
    kept until then, the set as long as its latest entry; the entries past their end
    are dropped."""
    first = client.admin.shards[0]
    key, ends = first.keys.web_sessions_ended, expires * 1000
    now = now_ms()
    pipe = first.redis.pipeline(transaction=False)
    pipe.zadd(key, {sid: ends})
    pipe.zremrangebyscore(key, "-inf", now)  # sessions past their end anyway
    pipe.zrange(key, -1, -1, withscores=True)  # the latest end
    latest = (await pipe.execute())[-1]
    last_ms = int(latest[0][1]) if latest else ends
    await first.redis.pexpire(key, max(last_ms, ends) - now + 60_000)


async def audit_push(client: Client, entry: bytes, keep: int) -> None:
    """Add an entry to the audit log, which keeps the ``keep`` newest."""
    first = client.admin.shards[0]
    pipe = first.redis.pipeline(transaction=False)
    pipe.lpush(first.keys.web_audit, entry)
    pipe.ltrim(first.keys.web_audit, 0, keep - 1)
    await pipe.execute()


async def audit_page(client: Client, offset: int, count: int) -> tuple[int, list[bytes]]:
    """How many entries the audit log holds, and ``count`` of them from ``offset``,
    newest first, in one round trip."""
    first = client.admin.shards[0]
    pipe = first.redis.pipeline(transaction=False)
    pipe.llen(first.keys.web_audit)
    pipe.lrange(first.keys.web_audit, offset, offset + count - 1)
    total, raw = await pipe.execute()
    return int(total), list(raw)


async def forget_namespace(client: Client) -> None:
    """Delete every key of the namespace (a scan: for a test's namespace, once)."""
    first = client.admin.shards[0]
    batch: list[bytes] = []
    async for key in first.redis.scan_iter(match=first.keys.prefix + "*", count=1000):
        batch.append(key)  # (a namespace has no glob characters)
        if len(batch) >= 1000:
            await first.redis.unlink(*batch)
            batch.clear()
    if batch:
        await first.redis.unlink(*batch)
