"""What each page shows, as the bodies of :mod:`rota.web.bodies`: the API returns them
and the HTML pages render them (as the same plain values), so both always agree.

Everything is read through :class:`rota.client.Client` and :mod:`rota.inspect`: no
view reaches Redis itself.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Final, get_args

import msgspec

from rota import inspect
from rota.client import Client
from rota.client.status import Bucket, CronEntry
from rota.config import Settings
from rota.inspect import served_names
from rota.inspect.cron import turned_off
from rota.inspect.figures import (
    MINUTES,
    done_last_minutes,
    leased_names,
    name_minutes,
    queue_totals,
    totals_history,
)
from rota.inspect.flows import flow_view
from rota.protocol.job import JobRecord, JobSet
from rota.web import bodies as b

__all__ = [
    "JOB_SETS",
    "RETRYABLE",
    "JobSet",
    "busy",
    "dashboard",
    "flow",
    "group_detail",
    "job_detail",
    "job_page",
    "name_stats",
    "pools",
    "queue_jobs",
    "queues",
    "redis_info",
    "shards",
]

JOB_SETS: Final[tuple[JobSet, ...]] = get_args(JobSet)
#: The sets whose jobs can be queued now; a waiting job runs when its parents complete.
RETRYABLE: Final[tuple[JobSet, ...]] = ("scheduled", "retry", "dead")


#: The longest indented rendering of a value sent: an 18 KB value nested 900 deep
#: indents to 16 MB. A value past it is shown as stored (and cut on the page).
PRETTY_LIMIT: Final = 64 * 1024
#: Nesting past this depth is not indented: each level adds two spaces to every line.
_PRETTY_DEPTH: Final = 16


def _pretty(text: str | None) -> tuple[Any, str | None]:
    """Decoded JSON and an indented rendering, None when that would pass
    :data:`PRETTY_LIMIT`; the text itself when it is not JSON (or nests deeper than
    the decoder goes)."""
    if text is None:
        return None, None
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None, text
    if len(text) > PRETTY_LIMIT // 2 or _deeper(value, _PRETTY_DEPTH):
        return value, None
    pretty = msgspec.json.format(text, indent=2)
    return value, pretty if len(pretty) <= PRETTY_LIMIT else None


def _deeper(value: Any, depth: int) -> bool:
    """Whether ``value`` nests more than ``depth`` arrays or objects deep (no recursion:
    a value may nest as deep as the decoder allows)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if level >= depth:
                return True
            stack += [(x, level + 1) for x in item if isinstance(x, list | dict)]
    return False


def _progress(text: str | None) -> b.JobProgress | None:
    if not text:
        return None
    head, _, message = text.partition(" ")
    try:
        percent = float(head)
    except ValueError:
        return b.JobProgress(None, text)
    return b.JobProgress(percent, message)


def _bucket(bucket: Bucket) -> b.Bucket:
    counts = bucket.counts
    return b.mirror(
        b.Bucket, bucket, processed=counts.get("processed", 0), failed=counts.get("failed", 0)
    )


async def dashboard(client: Client, minutes: int = 60, days: int = 30) -> b.Dashboard:
    """Totals, sizes and the processed/failed history per minute and per day."""
    stats = await client.admin.stats()
    history = await totals_history(client, minutes, days)
    queued, running = await queue_totals(client)
    sizes = {"queued": queued, "running": running}
    sizes.update(await client.admin.job_set_sizes())
    sizes["pools"] = len(await client.admin.pools())
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
    total, page = await client.admin.queue_page(offset, limit)
    previous, current = await done_last_minutes(client, [q.name for q in page], now)
    served = await served_names(client)
    for q in page:
        done = previous[q.name] * weight + current[q.name]
        out.append(
            b.mirror(b.Queue, q, done_per_second=round(done / 60, 2), served=q.name in served)
        )
    return b.Queues(out, total, offset, limit)


async def name_stats(client: Client, name: str, minutes: int = MINUTES) -> b.NameStats:
    """The last ``minutes`` UTC minutes of ``name``: processed, failed and the mean run
    time of its complete jobs (see :func:`rota.inspect.figures.name_minutes`)."""
    out = []
    for minute in await name_minutes(client, name, minutes):
        done, ran = minute.counts["processed"], minute.counts["ms"]
        mean = round(ran / done, 1) if done else None
        out.append(b.NameMinute(b.ms(minute.start), done, minute.counts["failed"], ran, mean))
    return b.NameStats(name, out)


async def queue_jobs(
    client: Client, name: str, offset: int = 0, limit: int = 25, newest: bool = False
) -> b.QueueJobs:
    """A page of the jobs waiting in ``name``'s queue (see :func:`rota.inspect.queue_view`)."""
    view = await inspect.queue_view(client, name, offset, limit, newest)
    return b.mirror(b.QueueJobs, view, jobs=[b.mirror(b.QueuedJob, j) for j in view.jobs])


async def pools(client: Client, settings: Settings) -> b.Pools:
    """Live pools; ``stale``: no heartbeat for more than two of its intervals."""
    live = await client.admin.pools()
    busy = Counter(r.pool for r in await client.admin.running(await leased_names(client), live))
    out = [
        b.mirror(b.Pool, pool, busy=busy[pool.id], periodic=[c.name for c in pool.periodic])
        for pool in live
    ]
    return b.Pools(out, settings.heartbeat_interval)


async def cron(client: Client, settings: Settings) -> b.Cron:
    """The periodic jobs of the live pools (stale ones left out), by name: what their
    snapshots say, merged, and whether each is on. The next run is the soonest after the
    last one any pool saw (a pool whose heartbeat came before that fire still names it
    as its next). A name turned off that no live pool fires any more is listed too (it
    can be turned on again)."""
    seen: dict[str, list[tuple[CronEntry, str]]] = {}
    for pool in await client.admin.pools():
        if not pool.stale:
            for c in pool.periodic:
                seen.setdefault(c.name, []).append((c, pool.id))
    off = {name: b.ms(since) or None for name, since in (await turned_off(client)).items()}
    out = []
    for name, entries in seen.items():
        first = entries[0][0]
        last = max((c.last_at or 0 for c, _ in entries), default=0)
        nexts = [c.next_at for c, _ in entries]
        upcoming = min((n for n in nexts if n > last), default=max(nexts))
        pools = [pool for _, pool in entries]
        last_ms = b.ms(last) if last else None
        on, since = name not in off, off.get(name)
        out.append(b.CronJob(name, first.cron, first.tz, b.ms(upcoming), last_ms, pools, on, since))
    out.sort(key=lambda c: (c.next_at, c.name))
    out += [
        b.CronJob(name, "", "", 0, None, [], enabled=False, off_since=since)
        for name, since in sorted(off.items())
        if name not in seen
    ]
    return b.Cron(out)


async def busy(client: Client) -> b.Busy:
    """Jobs running now, from the running sets and the job records (exact at the read;
    only the last checkin message comes from the pools' snapshots)."""
    running = await client.admin.running(await leased_names(client))
    return b.Busy([b.mirror(b.BusyWorker, r) for r in running])


def _summary(job: JobRecord) -> dict[str, Any]:
    """The fields of :data:`~rota.web.bodies.SUMMARY`, the times in ms."""
    times = msgspec.structs.asdict(b.mirror(b.JobTimes, job))
    return {f: times[f] if f in times else getattr(job, f) for f in b.SUMMARY}


#: How long a search of a page reads the set before it stops and says where: the page
#: stays under 300 ms on a set of 100,000 (the next search goes on from there).
SEARCH_BUDGET: Final = 0.15


async def job_page(
    client: Client, which: JobSet, offset: int = 0, limit: int = 25, q: str = "", start: int = 0
) -> b.JobPage:
    """A page of a job set; ``q`` keeps the jobs whose id or name contains it, searched
    from position ``start`` of the set for at most :data:`SEARCH_BUDGET`."""
    searched = size = None
    if not q.strip():
        page = await client.admin.page(which, offset, limit)
        total, jobs, start = page.total, page.jobs, 0
    else:
        found = await client.admin.search(
            which, q, offset, limit, start=start, budget=SEARCH_BUDGET
        )
        total, jobs, searched, size = found.total, found.jobs, found.searched, found.size
    return b.JobPage(
        set=which,
        q=q,
        total=total,
        offset=offset,
        limit=limit,
        searched=searched,
        size=size,
        start=start,
        jobs=[_summary(j) for j in jobs],
    )


async def redis_info(client: Client) -> b.Redis:
    """Server figures from INFO and the round trip of one PING, measured here."""
    found = await inspect.server_info(client)
    return b.mirror(b.Redis, found, namespace=client.namespace)


async def shards(client: Client) -> b.Shards:
    """Each shard's tag, slot, server and sizes (see :func:`rota.inspect.shard_views`)."""
    return b.Shards(client.namespace, await inspect.shard_views(client))


async def job_detail(client: Client, job_id: str) -> dict[str, Any] | None:
    """Everything stored about a job, its log lines, and the jobs it is tied to (see
    :func:`rota.inspect.job_view`); None when there is no such job.

    The record's fields, then :class:`~rota.web.bodies.JobDetail`'s (replacing the
    times and ``args``, ``result`` and ``progress``): a record's new field is sent, and
    documented, without a change here."""
    view = await inspect.job_view(client, job_id)
    if view is None:
        return None
    record, progress = view.record, view.group_progress
    args, args_text = _pretty(record.args)
    result, result_text = _pretty(record.result)
    detail = b.mirror(  # the record's times, in ms
        b.JobDetail,
        record,
        args=args,
        args_raw=record.args,
        args_pretty=args_text,
        result=result,
        result_raw=record.result,
        result_pretty=result_text,
        progress=_progress(record.progress),
        progress_raw=record.progress,
        logs=view.logs,
        parents=view.parents,
        children=view.children,
        children_total=view.children_total,
        unserved=await inspect.unserved(client, view.parents),
        callback=view.callback,
        group_progress=None if progress is None else b.mirror(b.GroupProgress, progress),
    )
    return {**msgspec.structs.asdict(record), **msgspec.structs.asdict(detail)}


async def group_detail(
    client: Client,
    group_id: str,
    offset: int = 0,
    limit: int = 25,
    state: inspect.MemberState | None = None,
) -> b.Group | None:
    """A group's progress, its callback, and a page of its members, those in ``state``
    only when given (see :func:`rota.inspect.group_view`); None when there is no such
    group."""
    view = await inspect.group_view(client, group_id, offset, limit, state)
    if view is None:
        return None
    page = ("then", "members", "failed_members", "state", "matching", "scanned")
    return b.mirror(
        b.Group, view.progress, offset=offset, limit=limit, **{f: getattr(view, f) for f in page}
    )


async def flow(client: Client, job_id: str) -> b.Flow | None:
    """The graph of the workflow ``job_id`` belongs to (see
    :func:`rota.inspect.flows.flow_view`); None when ``job_id`` has no record."""
    view = await flow_view(client, job_id)
    if view is None:
        return None
    return b.mirror(b.Flow, view)
