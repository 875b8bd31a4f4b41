"""Fair keys, one key's jobs (:meth:`rota.client.fair.FairKeys.jobs`): a page
of the jobs queued in ``fqueue:<name>/<key>`` in the order the key's turns take them
(the list's tail first), and its running jobs from ``frun:<name>/<key>``, and from the
name's running set (its first :data:`~rota.client.fair_top.RUNNING_SCAN` jobs) for a key
that no limit reaches, which has no running set: the soonest lease deadline first.
BullMQ Pro's ``getGroupJobs``, for the operator who asks which jobs a tenant has
waiting.

A key lives in the shard its key names, but a job of the key routed elsewhere (by a
group, a unique key or parents) waits in that shard's list of the key: the pages run
over the key's own shard first, then the others in order (each shard takes its own
turns, so there is no order between them). Four round trips per shard at most,
whatever the length of the list: the lengths and the running jobs, their keys, the
page's ids, then their records.

Whatever a hand wrote there is shown, never a failure: an entry of the list that is no
job id reads as a row of state ``malformed`` (its text, cut, as the id), one whose
record is gone as ``missing``, a record that is no hash as ``malformed``; a list or a
running set of another type reads as empty and is named in ``malformed``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final, NamedTuple

import msgspec
from msgspec import Meta

from rota.client.fair_top import RUNNING_SCAN, row_of, settings_of
from rota.client.rules import gather
from rota.protocol.bounds import Bound
from rota.protocol.job import NAME_RE, count_of, field_seconds, field_text, reply_text, state_text

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = ["FAIR_JOBS", "FairKeyJob", "FairKeyJobs", "key_jobs"]

#: The page of a key's jobs: its ``offset`` among the queued ones and its ``count``.
FAIR_JOBS: Final = {"offset": Bound(0, 10**9, whole=True), "count": Bound(1, 1000, whole=True)}
#: The states of a row that no record holds.
MISSING: Final = "missing"
MALFORMED: Final = "malformed"
_FIELDS: Final = ("name", "state", "enqueued_at", "started_at")


class FairKeyJob(msgspec.Struct, frozen=True):
    """One job of a key: its id, its record's ``state`` (``missing`` when the record is
    gone, ``malformed`` when the entry is no job id or its record no hash), its job
    name, when it was enqueued and started (seconds), and, running, its lease
    ``deadline`` (seconds)."""

    id: str
    state: str
    name: str | None = None
    enqueued_at: float | None = None
    started_at: float | None = None
    deadline: float | None = None


class FairKeyJobs(msgspec.Struct, frozen=True):
    """A page of the queued jobs of one fair key of a job name, the next to run first,
    and its first running jobs, with the key's figures and settings (as
    :class:`~rota.client.fair_top.FairKeyInfo` says them)."""

    name: str
    key: str
    queued: Annotated[int, Meta(description="jobs of the key queued, over every shard")]
    running: Annotated[int, Meta(description="jobs of the key running, over every shard")]
    limit: Annotated[int | None, Meta(description="the limit it runs under (null: none)")]
    weight: int
    paused: bool
    rate: str | None
    offset: int
    count: int
    jobs: Annotated[list[FairKeyJob], Meta(description="the page of its queued jobs")]
    running_jobs: Annotated[list[FairKeyJob], Meta(description="up to count running jobs")]
    malformed: Annotated[
        list[str],
        Meta(
            description="'queue', 'running': a key of another type, read as empty; 'weight',"
            " 'limit', 'rate': a setting written wrong, read as the default"
        ),
    ] = msgspec.field(default_factory=list)


class _Sizes(NamedTuple):
    """What the first round trip reads of one shard: the key's queued and running
    counts, its first running jobs (id, lease deadline in ms) and what is malformed."""

    queued: int
    running: int
    leases: list[tuple[str, float]]
    malformed: list[str]
    settings: Any  # the key's settings, read in its own shard only


async def key_jobs(
    shards: Sequence[Shard], home: Shard, name: str, key: str, offset: int, count: int
) -> FairKeyJobs:
    """The page at ``offset`` of ``count`` queued jobs of ``key`` over ``shards``, the
    key's ``home`` shard first, and its first ``count`` running jobs (see the module)."""
    order = [home, *(s for s in shards if s is not home)]
    sizes = await gather([functools.partial(_sizes, s, name, key, count, s is home) for s in order])
    cuts: list[tuple[int, int] | None] = []
    base = 0
    for size in sizes:
        start, stop = max(0, offset - base), min(size.queued, offset + count - base)
        cuts.append((start, stop) if start < stop else None)
        base += size.queued
    pages = await gather(
        [functools.partial(_page, s, name, key, cut) for s, cut in zip(order, cuts, strict=True)]
    )
    # the first running jobs over every shard, the soonest deadline first
    leases = sorted(
        ((deadline, job_id, i) for i, size in enumerate(sizes) for job_id, deadline in size.leases)
    )[:count]
    rows = await gather(
        [
            functools.partial(_rows, s, ids, {job_id: d for d, job_id, j in leases if j == i})
            for i, (s, ids) in enumerate(zip(order, pages, strict=True))
        ]
    )
    running = {job.id: job for _, shard_running in rows for job in shard_running}
    info = row_of(key, None, 0, sizes[0].settings)
    return FairKeyJobs(
        name,
        key,
        sum(size.queued for size in sizes),
        sum(size.running for size in sizes),
        info.limit,
        info.weight,
        info.paused,
        info.rate,
        offset,
        count,
        [job for queued, _ in rows for job in queued],
        [running[job_id] for _, job_id, _ in leases if job_id in running],
        sorted({*info.malformed, *(what for size in sizes for what in size.malformed)}),
    )


async def _sizes(shard: Shard, name: str, key: str, count: int, home: bool) -> _Sizes:
    """The first round trip of one shard (and the key's settings in its ``home``)."""
    k = shard.keys
    queued, running, leases, named, *settings = await shard.piped(
        lambda p: (
            p.llen(k.fair_queue(name, key)),
            p.zcard(k.fair_running(name, key)),
            p.zrange(k.fair_running(name, key), 0, count - 1, withscores=True),
            p.zrange(k.running(name), 0, RUNNING_SCAN - 1, withscores=True),
            *([settings_of(p, shard, name, key)] if home else []),
        ),
        errors=False,  # a key of another type answers an error: read as empty
    )
    bad = ["queue"] * (not isinstance(queued, int)) + ["running"] * (not isinstance(running, int))
    rows = [(reply_text(i), float(d)) for i, d in leases] if isinstance(leases, list) else []
    # A key with a running set is one a limit reaches, whose set holds all its leases
    # (a first limit counts them in: fair_keys.lua): only a key without one is looked
    # for among the name's running jobs, one HGET each.
    scan = named if isinstance(named, list) and not count_of(running) else []
    found = await _of_key(shard, key, scan)
    kept = dict(rows)
    rows += [(i, d) for i, d in found if i not in kept]
    rows.sort(key=lambda row: row[1])
    total = max(count_of(running), len(found))
    return _Sizes(count_of(queued), total, rows[:count], bad, settings[0] if home else None)


async def _of_key(shard: Shard, key: str, leases: list[Any]) -> list[tuple[str, float]]:
    """The leases (id, deadline in ms) of the name's running set read whose job is of
    ``key``: one round trip, none when nothing runs."""
    if not leases:
        return []
    ids = [reply_text(i) for i, _ in leases]
    keys = await shard.piped(
        lambda p: [p.hget(shard.keys.job(i), "fair") for i in ids], errors=False
    )
    return [
        (i, float(d))
        for i, (_, d), fair in zip(ids, leases, keys, strict=True)
        if isinstance(fair, bytes) and reply_text(fair) == key
    ]


async def _page(shard: Shard, name: str, key: str, cut: tuple[int, int] | None) -> list[str]:
    """The entries ``cut`` of the key's list of one shard, in the order its turns take
    them (the tail first): one ``LRANGE`` counted from the tail."""
    if cut is None:
        return []
    start, stop = cut
    (raw,) = await shard.piped(
        lambda p: [p.lrange(shard.keys.fair_queue(name, key), -stop, -start - 1)], errors=False
    )
    return [reply_text(i) for i in reversed(raw)] if isinstance(raw, list) else []


async def _rows(
    shard: Shard, ids: list[str], leases: dict[str, float]
) -> tuple[list[FairKeyJob], list[FairKeyJob]]:
    """The rows of the queued ``ids`` and of the running jobs ``leases`` (id: lease
    deadline in ms) of one shard, from their records: one round trip."""
    read = [i for i in (*ids, *leases) if NAME_RE.match(i)]
    replies = await shard.piped(
        lambda p: [p.hmget(shard.keys.job(i), *_FIELDS) for i in read], errors=False
    )
    records = dict(zip(read, replies, strict=True))

    def row(job_id: str, deadline: float | None) -> FairKeyJob:
        fields = records.get(job_id)
        if not isinstance(fields, list):  # no job id, or a record that is no hash
            return FairKeyJob(job_id[:200], MALFORMED)
        name, state, enqueued, started = fields
        if name is None and state is None:
            return FairKeyJob(job_id, MISSING)
        return FairKeyJob(
            job_id,
            state_text(state, name),
            field_text(name),
            field_seconds(enqueued),
            field_seconds(started),
            None if deadline is None else deadline / 1000,
        )

    return [row(i, None) for i in ids], [row(i, d) for i, d in leases.items()]
