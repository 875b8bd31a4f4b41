"""What each page shows, as the bodies of :mod:`rota.web.bodies`: the API returns them
and the HTML pages render them (as the same plain values), so both always agree.

Everything is read through :class:`rota.client.Client`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Final, get_args

import msgspec

from rota.client import Client
from rota.config import Settings
from rota.protocol.job import JobRecord, JobSet, field_int, field_text, reply_text, state_text
from rota.status import Bucket, CronEntry
from rota.web import bodies as b
from rota.web.figures import done_last_minutes, leased_names, queue_totals, totals_history
from rota.web.related import (
    FINAL_STATES,
    FLOW_LIMIT,
    MISSING,
    flow,
    group_detail,
    job_detail,
    served_names,
)

__all__ = [
    "FINAL_STATES",
    "FLOW_LIMIT",
    "JOB_SETS",
    "MISSING",
    "RETRYABLE",
    "JobSet",
    "busy",
    "dashboard",
    "flow",
    "group_detail",
    "job_detail",
    "job_page",
    "missing_from_set",
    "pools",
    "queue_jobs",
    "queues",
    "redis_info",
    "served_names",
]

JOB_SETS: Final[tuple[JobSet, ...]] = get_args(JobSet)
#: The sets whose jobs can be queued now; a waiting job runs when its parents complete.
RETRYABLE: Final[tuple[JobSet, ...]] = ("scheduled", "retry", "dead")
#: The most characters of a queued job's args its queue's page shows, and the longest
#: args read for that (longer ones are a link away: a page of big jobs stays cheap).
ARGS_PREVIEW: Final = 200
ARGS_READ: Final = 4096


_INFO_FIELDS: Final = (
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


def _bucket(bucket: Bucket) -> b.Bucket:
    counts = bucket.counts
    return b.mirror(
        b.Bucket, bucket, processed=counts.get("processed", 0), failed=counts.get("failed", 0)
    )


async def dashboard(client: Client, minutes: int = 60, days: int = 30) -> b.Dashboard:
    """Totals, sizes and the processed/failed history per minute and per day."""
    stats = await client.stats()
    history = await totals_history(client, minutes, days)
    queued, running = await queue_totals(client)
    sizes = {"queued": queued, "running": running}
    sizes.update(await client.job_set_sizes())
    sizes["pools"] = len(await client.pools())
    sizes["busy"] = sizes["running"]
    return b.Dashboard(
        namespace=client.namespace,
        totals={k: stats.get(k, 0) for k in ("processed", "failed", "dead", "lost", "aborted")},
        sizes=sizes,
        minutes=[_bucket(x) for x in history.minutes],
        days=[_bucket(x) for x in history.days],
    )


async def queues(client: Client, offset: int = 0, limit: int = 100) -> b.Queues:
    """A page of the queues' figures (the busiest first: see ``queue_page``), and
    ``done_per_second``: jobs of the name completed per second over the last minute
    (from the per-minute counters)."""
    now = time.time()
    weight = 1 - (now % 60) / 60  # the share of the previous minute inside the last 60 s
    out = []
    total, page = await client.queue_page(offset, limit)
    previous, current = await done_last_minutes(client, [q.name for q in page], now)
    served = await served_names(client)
    for q in page:
        done = previous[q.name] * weight + current[q.name]
        out.append(
            b.mirror(b.Queue, q, done_per_second=round(done / 60, 2), served=q.name in served)
        )
    return b.Queues(out, total, offset, limit)


async def queue_jobs(
    client: Client, name: str, offset: int = 0, limit: int = 25, newest: bool = False
) -> b.QueueJobs:
    """A page of the jobs waiting in ``name``'s queue, the next to run first (or the
    newest first). A queue's list has its newest job at the head, so a page is one
    ``LRANGE`` counted from the end it starts at (cheap deep into a long queue), then
    the page's records: their fields and the length of their args, then the args that
    are short enough to show (three round trips whatever the queue's length)."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    pipe.llen(k.queue(name))
    if newest:
        pipe.lrange(k.queue(name), offset, offset + limit - 1)
    else:
        pipe.lrange(k.queue(name), -offset - limit, -offset - 1)
    pipe.sismember(k.paused, name)
    total, raw, paused = await pipe.execute()
    ids = [reply_text(i) for i in (raw if newest else reversed(raw))]
    pipe = client.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(k.job(i), "name", "state", "enqueued_at")
        pipe.hstrlen(k.job(i), "args")
    rows = await pipe.execute() if ids else []
    fields, sizes = rows[0::2], [int(n) for n in rows[1::2]]
    shown = [i for i, size in zip(ids, sizes, strict=True) if 0 < size <= ARGS_READ]
    pipe = client.redis.pipeline(transaction=False)
    for i in shown:
        pipe.hget(k.job(i), "args")
    args = dict(zip(shown, await pipe.execute() if shown else [], strict=True))
    jobs = []
    for i, (job_name, state, enqueued), size in zip(ids, fields, sizes, strict=True):
        text = field_text(args.get(i))
        jobs.append(
            b.QueuedJob(
                id=i,
                name=field_text(job_name),
                state=MISSING
                if job_name is None and state is None
                else state_text(state, job_name),
                enqueued_at=field_int(enqueued) or None,
                args=None if text is None else text[:ARGS_PREVIEW],
                args_bytes=size,
            )
        )
    return b.QueueJobs(
        name=name,
        order="newest" if newest else "oldest",
        total=int(total),
        offset=offset,
        limit=limit,
        paused=bool(paused),
        served=name in await served_names(client),
        jobs=jobs,
    )


async def pools(client: Client, settings: Settings) -> b.Pools:
    """Live pools; ``stale``: no heartbeat for more than two of its intervals."""
    live = await client.pools(heartbeat_interval=settings.heartbeat_interval)
    busy = Counter(r.pool for r in await client.running(await leased_names(client), live))
    out = [
        b.mirror(b.Pool, pool, busy=busy[pool.id], periodic=[c.name for c in pool.periodic])
        for pool in live
    ]
    return b.Pools(out, settings.heartbeat_interval)


async def cron(client: Client, settings: Settings) -> b.Cron:
    """The periodic jobs of the live pools (stale ones left out), by name: what their
    snapshots say, merged. The next run is the soonest after the last one any pool saw
    (a pool whose heartbeat came before that fire still names it as its next)."""
    seen: dict[str, list[tuple[CronEntry, str]]] = {}
    for pool in await client.pools(heartbeat_interval=settings.heartbeat_interval):
        if not pool.stale:
            for c in pool.periodic:
                seen.setdefault(c.name, []).append((c, pool.id))
    out = []
    for name, entries in seen.items():
        first = entries[0][0]
        last = max((c.last_at or 0 for c, _ in entries), default=0)
        nexts = [c.next_at for c, _ in entries]
        upcoming = min((n for n in nexts if n > last), default=max(nexts))
        pools = [pool for _, pool in entries]
        last_ms = b.ms(last) if last else None
        out.append(b.CronJob(name, first.cron, first.tz, b.ms(upcoming), last_ms, pools))
    return b.Cron(sorted(out, key=lambda c: (c.next_at, c.name)))


async def busy(client: Client) -> b.Busy:
    """Jobs running now, from the running sets and the job records (exact at the read;
    only the last checkin message comes from the pools' snapshots)."""
    running = await client.running(await leased_names(client))
    return b.Busy([b.mirror(b.BusyWorker, r) for r in running])


def _summary(job: JobRecord) -> dict[str, Any]:
    """The fields of :data:`~rota.web.bodies.SUMMARY`, the times in ms."""
    times = msgspec.structs.asdict(b.mirror(b.JobTimes, job))
    return {f: times[f] if f in times else getattr(job, f) for f in b.SUMMARY}


async def job_page(
    client: Client, which: JobSet, offset: int = 0, limit: int = 25, q: str = ""
) -> b.JobPage:
    """A page of a job set; ``q`` keeps the jobs whose id or name contains it."""
    searched = size = None
    if not q.strip():
        page = await client.page(which, offset, limit)
        total, jobs = page.total, page.jobs
    else:
        found = await client.search(which, q, offset, limit)
        total, jobs, searched, size = found.total, found.jobs, found.searched, found.size
    return b.JobPage(
        set=which,
        q=q,
        total=total,
        offset=offset,
        limit=limit,
        searched=searched,
        size=size,
        jobs=[_summary(j) for j in jobs],
    )


async def missing_from_set(client: Client, which: JobSet, ids: list[str]) -> list[str]:
    """The ids that are not in the set (one round trip)."""
    if not ids:
        return []
    k = client.keys
    key = {"scheduled": k.scheduled, "retry": k.retry, "waiting": k.waiting}.get(which, k.dead)
    scores = await client.redis.zmscore(key, ids)
    return [i for i, s in zip(ids, scores, strict=True) if s is None]


async def redis_info(client: Client) -> b.Redis:
    """Server figures from INFO and the round trip of one PING, measured here."""
    started = time.perf_counter()
    await client.redis.ping()
    ping_ms = (time.perf_counter() - started) * 1000
    info = await client.redis.info()
    fields: dict[str, Any] = {k: info[k] for k in _INFO_FIELDS if k in info}
    for k in ("redis_version", "valkey_version", "used_memory_human", "maxmemory_policy", "os"):
        if k in fields:
            fields[k] = str(fields[k])
    return b.Redis(round(ping_ms, 3), fields, client.namespace)
