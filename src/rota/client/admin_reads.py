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

from rota.client.workflow import (
    MISSING,
    RELATED_FIELDS,
    GroupProgress,
    Related,
    pipelined,
    read_related,
)
from rota.protocol.job import (
    count_of,
    field_int,
    field_seconds,
    field_text,
    now_ms,
    reply_text,
)

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
    "queued_rows",
    "related_rows",
    "session_ended",
    "stats_fields",
    "stats_totals",
]

T = TypeVar("T")


def group_shard(client: Client, group_id: str) -> Shard:
    """The shard that holds group ``group_id``, its members and its callback: the one
    its id names (see :mod:`rota.protocol.shards`)."""
    return client.admin.follower.route.home(group_id)


def _each(client: Client, call: Callable[[Shard], Awaitable[T]]) -> Awaitable[list[T]]:
    """``call`` on every shard of ``client``'s namespace at once, in shard order."""
    return client.admin.follower.route.each(call)


# -- a job, a group, a flow ------------------------------------------------------------


async def job_and_ties(shard: Shard, job_id: str) -> tuple[Any, Any, Any]:
    """A job's record (its hash), log lines and children, in one round trip."""
    k = shard.keys
    replies = await shard.piped(
        lambda p: (
            p.hgetall(k.job(job_id)),
            p.lrange(k.joblog(job_id), 0, -1),
            p.smembers(k.children(job_id)),
        ),
        errors=False,
    )
    h, logs, kids = (pipelined(v) for v in replies)
    return h, logs, kids


async def related_rows(shard: Shard, ids: list[str], group_id: str | None) -> list[Any]:
    """Each job's ``HMGET`` of ``RELATED_FIELDS``, then (with ``group_id``) the group's
    progress fields, in one round trip."""
    k = shard.keys
    group = [k.group(group_id)] if group_id else []
    return await shard.piped(
        lambda p: (
            [p.hmget(k.job(i), *RELATED_FIELDS) for i in ids]
            + [p.hmget(g, *GroupProgress.FIELDS) for g in group]
        ),
        errors=False,
    )


async def group_head(shard: Shard, group_id: str, offset: int, limit: int) -> tuple[Any, list[str]]:
    """A group's progress fields and a page of its members' ids, in one round trip."""
    k, last = shard.keys, offset + limit - 1
    raw, members = await shard.piped(
        lambda p: (
            p.hmget(k.group(group_id), *GroupProgress.FIELDS),
            p.lrange(k.group_members(group_id), offset, last),
        ),
        errors=False,
    )
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
    return await client.admin.follower.route.related(
        ids, _flow_rows, lambda row: read_related("", row[0]).state == MISSING
    )


async def _flow_rows(shard: Shard, ids: list[str]) -> list[tuple[Any, Any]]:
    """:func:`flow_rows` of one shard."""
    k, fields = shard.keys, ("name", "state", "after", "group", "waits_group")
    read = lambda p: [(p.hmget(k.job(i), *fields), p.smembers(k.children(i))) for i in ids]  # noqa: E731
    rows = await shard.piped(read, errors=False)
    return list(zip(rows[0::2], rows[1::2], strict=True))


async def group_links(
    shard: Shard, wanted_then: list[str], wanted_members: list[str], limit: int
) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """The callbacks and (the first ``limit``) members of groups of one shard, in one
    round trip."""
    k = shard.keys
    answers = iter(
        await shard.piped(
            lambda p: (
                [p.hget(k.group(g), "then") for g in wanted_then]
                + [p.lrange(k.group_members(g), 0, limit - 1) for g in wanted_members]
            ),
            errors=False,
        )
    )
    thens = {g: field_text(pipelined(next(answers))) or None for g in wanted_then}
    members = {g: [reply_text(m) for m in pipelined(next(answers)) or ()] for g in wanted_members}
    return thens, members


# -- queues and figures ----------------------------------------------------------------

#: A queued job as :func:`queue_rows` reads it: its id, name, state, enqueue time (ms),
#: the length of its args and the args (None when longer than asked for).
QueuedRow = tuple[str, Any, Any, Any, int, Any]


async def queue_rows(
    shard: Shard, name: str, offset: int, limit: int, newest: bool, longest: int
) -> tuple[int, bool, list[QueuedRow], int]:
    """A page of the jobs waiting in ``name``'s queue of one shard (see
    :func:`rota.inspect.queue_view`), the queue's length, whether it is paused and how
    many jobs with a fair key wait in its keys (not in the queue's list):
    one ``LRANGE`` counted from the end the page starts at, the page's fields and args'
    lengths, then the args up to ``longest`` bytes (three round trips)."""
    k, q = shard.keys, shard.keys.queue(name)
    page = (offset, offset + limit - 1) if newest else (-offset - limit, -offset - 1)
    total, raw, paused, keyed = await shard.piped(
        lambda p: (
            p.llen(q),
            p.lrange(q, *page),
            p.sismember(k.paused, name),
            p.hget(k.fair(name), "n"),  # its keyed jobs queued (lua/_fair.lua)
        )
    )
    ids = [reply_text(i) for i in (raw if newest else reversed(raw))]
    return int(total), bool(paused), await queued_rows(shard, ids, longest), count_of(keyed)


async def queued_rows(shard: Shard, ids: list[str], longest: int) -> list[QueuedRow]:
    """The rows of queued jobs ``ids`` of one shard (see :func:`queue_rows`): their
    fields and args' lengths, then the args up to ``longest`` bytes (two round trips)."""
    k = shard.keys
    jobs = [k.job(i) for i in ids]
    # A record that is no hash (written by others) answers errors: read as missing.
    rows = await shard.piped(
        lambda p: [
            (p.hmget(j, "name", "state", "enqueued_at"), p.hstrlen(j, "args")) for j in jobs
        ],
        errors=False,
    )
    fields = [(None,) * 3 if isinstance(f, Exception) else f for f in rows[0::2]]
    sizes = [n if isinstance(n, int) else 0 for n in rows[1::2]]
    shown = [i for i, size in zip(ids, sizes, strict=True) if 0 < size <= longest]
    texts = await shard.piped(lambda p: [p.hget(k.job(i), "args") for i in shown])
    args = dict(zip(shown, texts, strict=True))
    return [(i, *f, size, args.get(i)) for i, f, size in zip(ids, fields, sizes, strict=True)]


async def stats_fields(
    client: Client, buckets: list[str], fields: Sequence[str]
) -> list[list[int]]:
    """``fields`` of each stats bucket (``YYYYmmddHHMM`` or ``YYYYmmdd``), one HMGET
    each, added up over every shard (each counts the jobs it ran)."""
    each = await _each(client, lambda s: _fields(s, buckets, fields))
    return [[sum(vs) for vs in zip(*rows, strict=True)] for rows in zip(*each, strict=True)]


async def _fields(shard: Shard, buckets: list[str], fields: Sequence[str]) -> list[list[int]]:
    """:func:`stats_fields` of one shard."""
    rows = await shard.piped(
        lambda p: [p.hmget(shard.keys.stats_bucket(b), fields) for b in buckets]
    )
    return [[field_int(v) for v in row] for row in rows]


async def leased_names(client: Client) -> list[str]:
    """The job names whose running set may hold leases (``Keys.leased``: the fetch that
    leases a job adds its name): the only running sets worth reading. Over every
    shard."""
    each = await _each(client, lambda s: s.redis.smembers(s.keys.leased))
    return sorted({reply_text(n) for names in each for n in names})


async def queue_totals(client: Client) -> tuple[int, int]:
    """Jobs queued, over every job name, and jobs running, over the names that may hold
    leases: added up over every shard, each read over the names it holds, on its bare
    connection (see :meth:`Shard.backlog`)."""
    each = await _each(client, _totals)
    return sum(q for q, _ in each), sum(r for _, r in each)


async def _totals(shard: Shard) -> tuple[int, int]:
    """:func:`queue_totals` of one shard."""
    counts = (await shard.backlog(await shard.names())).values()
    return sum(q for q, _ in counts), sum(r for _, r in counts)


async def stats_totals(client: Client, fields: Sequence[str]) -> dict[str, int]:
    """``fields`` of the counters since the namespace began (``processed``,
    ``processed:<name>``...), one ``HMGET`` per shard, added up: what a page shows of
    a hash that holds five fields for every job name."""
    each = await _each(client, lambda s: s.stats_of(fields))
    return {f: sum(vs) for f, vs in zip(fields, zip(*each, strict=True), strict=True)}


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
    *_, latest = await first.piped(
        lambda p: (
            p.zadd(key, {sid: ends}),
            p.zremrangebyscore(key, "-inf", now),  # sessions past their end anyway
            p.zrange(key, -1, -1, withscores=True),  # the latest end
        )
    )
    last_ms = int(latest[0][1]) if latest else ends
    await first.redis.pexpire(key, max(last_ms, ends) - now + 60_000)


async def audit_push(client: Client, entry: bytes, keep: int) -> None:
    """Add an entry to the audit log, which keeps the ``keep`` newest."""
    first = client.admin.shards[0]
    key = first.keys.web_audit
    await first.piped(lambda p: (p.lpush(key, entry), p.ltrim(key, 0, keep - 1)))


async def audit_page(client: Client, offset: int, count: int) -> tuple[int, list[bytes]]:
    """How many entries the audit log holds, and ``count`` of them from ``offset``,
    newest first, in one round trip."""
    first = client.admin.shards[0]
    key = first.keys.web_audit
    total, raw = await first.piped(
        lambda p: (p.llen(key), p.lrange(key, offset, offset + count - 1))
    )
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
