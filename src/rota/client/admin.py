"""The operator's reads and writes of a namespace on one object, :class:`Admin`
(``client.admin``): what the web UI and the CLI show and change. Each method runs a
one-shard read or write of :class:`rota.client.shard.Shard` by a rule of
:mod:`rota.client.routing`: a job name's change goes to every shard (a limit or a rate
as parts that follow the work, :mod:`rota.client.balance`); what counts is read from
every shard and merged; what names a job or a group goes to its shard."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from rota.client.admin_jobs import JobActions
from rota.client.balance import read_totals, set_whole, set_whole_rate
from rota.client.fair import FairKeys
from rota.client.finished import finished
from rota.client.follow import Follower
from rota.client.pages import job_set_page
from rota.client.pools import PoolCommands
from rota.client.rate_shares import read_rate_totals
from rota.client.routing import Shards, on_route
from rota.client.rules import add_counts, merge_bucket, merge_queue
from rota.client.run_times import RunTimeReads
from rota.client.scan import (
    JOBS,
    NEWEST_FIRST,
    POSITION,
    SEARCH_LIMIT,
    Fields,
    SearchedSet,
    checked_scan,
    scan_set,
    shard_position,
)
from rota.client.shard import Shard
from rota.client.status import Found, History, LivePool, Page, QueueInfo, RunningJob
from rota.client.workflow import Related
from rota.protocol import operator_calls
from rota.protocol.bounds import HANDLER, checked
from rota.protocol.job import JobRecord, JobSet, validate_name
from rota.protocol.rate import Rate, parse_rate

__all__ = ["Admin"]


class Admin:
    """Operate the queues and job sets of one namespace (see the module). Its parts, each
    over the same shards: :attr:`fair`, the fair keys of a name; :attr:`jobs`, the
    actions on one job and the clean by age; :attr:`commands`, the live pools'
    commands; :attr:`run_times`, a name's run times."""

    #: The classes of its parts: their methods raise rota's errors as the admin's do.
    PARTS: ClassVar = (FairKeys, JobActions, PoolCommands, RunTimeReads)

    def __init__(self, shards: Shards, follower: Follower | None = None) -> None:
        self._route = shards
        self._follower = follower or Follower(shards, None)
        #: The fair keys of a job name: their settings, the keys worth a look, a key's jobs.
        self.fair = FairKeys(shards)
        #: Move a queued job to the front, delete it, kill a retry, clean a set by age.
        self.jobs = JobActions(shards)
        #: Quiet, stop or resume a live pool, or every pool of a host; what each was told.
        self.commands = PoolCommands(shards, self.pools)
        #: A name's run times over the last hour or day: ``of``, ``of_names``, ``windows``.
        self.run_times = RunTimeReads(shards)

    @property
    def follower(self) -> Follower:
        """What follows the namespace's shard record: ``await admin.follower.reread()``
        after a change of the count (see :mod:`rota.client.follow`)."""
        return self._follower

    @property
    def shards(self) -> tuple[Shard, ...]:
        """The namespace's shards, in order: what a per-shard view reads alone."""
        return self._route.all

    async def shard_holding(self, job_id: str) -> Shard:
        """The shard that holds ``job_id`` (see :meth:`Shards.holding`): where a view
        reads a job and its ties in one round trip."""
        return await self._route.holding(job_id)

    # -- a job and its ties: its shard --------------------------------------------------

    async def stored(self, job_id: str, field: Literal["args", "result"]) -> bytes | None:
        """A job's args or result as stored (JSON text, byte for byte), ``b""`` for a
        job without one; None when there is no such job."""
        # b"" is a job of its shard without one: only None sends the read to the others.
        read = lambda s: s.stored(job_id, field)  # noqa: E731
        return await self._route.by_id(job_id, read, lambda found: found is None)

    async def dependency_results(self, job_id: str) -> dict[str, Any]:
        """The results of the jobs ``job_id`` waited for, by id (see
        :meth:`Shard.dependency_results`)."""
        return await self._route.by_id(job_id, lambda s: s.dependency_results(job_id))

    async def children(self, job_id: str) -> list[str]:
        """Ids of the jobs enqueued after ``job_id`` (kept as long as its record)."""
        return await self._route.by_id(job_id, lambda s: s.children(job_id))

    async def related(self, ids: Sequence[str]) -> list[Related]:
        """Each job's name and state, in one round trip per shard."""
        return await self._route.related(ids, Shard.related)

    async def group_members(self, group_id: str, offset: int = 0, count: int = 100) -> list[str]:
        """Ids of a group's members, in the order they were enqueued."""
        return await self._route.home(group_id).group_members(group_id, offset, count)

    # -- a job name: every shard --------------------------------------------------------

    async def pause(self, name: str) -> None:
        """Stop workers from taking jobs of ``name``; running ones finish. Works while
        Redis is out of memory, as does :meth:`resume`."""
        await self._route.each(lambda s: operator_calls.pause(s.scope, validate_name(name)))

    async def resume(self, name: str) -> None:
        """Let workers take jobs of ``name`` again (and wake a pool that waits for them)."""
        await self._route.each(
            lambda s: operator_calls.pause(s.scope, validate_name(name), resume=True)
        )

    async def set_limit(self, name: str, limit: int | None) -> None:
        """Cap how many jobs of ``name`` run at once across all pools (None: no cap).
        Over K shards the whole is kept in shard 0 and each shard holds a part that
        follows the work (:mod:`rota.client.balance`): any n from 1 up."""
        validate_name(name)
        if limit is not None:
            checked("limit", limit, HANDLER["max_concurrency"])
        if self._route.count == 1:
            return await self._route.all[0].set_limit(name, limit)
        await set_whole([s.scope for s in self._route.all], name, limit)

    async def set_rate(self, name: str, rate: str | Rate | None) -> None:
        """Cap how many jobs of ``name`` start per second, minute or hour across all
        pools (``"100/s"``, ``"30/min"``, ``"2/hour"``; None: no cap). Starts go one
        interval apart, after a quiet spell in a burst of up to 100 ms worth of starts
        (at least two): ``"50/s"`` may start 55 jobs in its first second. Pools waiting for
        the name are woken, so a raised or removed limit takes effect at once. A pool
        writes its handlers' ``rate`` when it starts. Over K shards the parts follow the
        work (:mod:`rota.client.rate_shares`)."""
        validate_name(name)
        whole = None if rate is None else parse_rate(rate)
        if self._route.count == 1:
            return await self._route.all[0].set_rate(name, whole)
        await set_whole_rate([s.scope for s in self._route.all], name, whole)

    async def clear_queue(self, name: str) -> int:
        """Delete every queued job of ``name``; returns how many."""
        return sum(await self._route.each(lambda s: s.clear_queue(name)))

    async def forget_idle_names(
        self, after: float, chunk: int = 500, *, turn: float | None = None
    ) -> list[str]:
        """Forget the job names that have had no job, pause, limit or live pool for
        ``after`` seconds, in every shard (see :meth:`Shard.forget_idle_names`): the
        names live pools serve, from their snapshots in shard 0."""
        first = self._route.all[0]
        each = await self._route.each(
            lambda s: s.forget_idle_names(after, chunk, turn=turn, snapshots=first)
        )
        return sorted({n for names in each for n in names})

    # -- what counts: every shard, merged ------------------------------------------------

    async def names(self) -> list[str]:
        """Every job name ever enqueued or registered, sorted."""
        return sorted({n for names in await self._route.each(Shard.names) for n in names})

    async def queues(self, names: Sequence[str] | None = None) -> list[QueueInfo]:
        """Figures of each queue, read in two round trips per shard whatever their number."""
        names = await self.names() if names is None else list(names)
        each = await self._route.each(lambda s: s.queues(names))
        k, home = self._route.count, self._route.all[0].scope
        wholes = (await read_totals(home), await read_rate_totals(home)) if k > 1 else ()
        return [merge_queue(rows, k, *wholes) for rows in zip(*each, strict=True)]

    async def backlog(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Queued and running jobs of each name, one round trip per shard."""
        each = await self._route.each(lambda s: s.backlog(names))
        return {n: (sum(c[n][0] for c in each), sum(c[n][1] for c in each)) for n in names}

    async def queue_page(self, offset: int = 0, count: int = 100) -> tuple[int, list[QueueInfo]]:
        """How many job names there are, and the figures of a page of them: the names
        with queued or running jobs first (most first), then the others by name. Two
        reads of every name's counts, one full read of the page's: a page stays cheap
        with thousands of names (the counts go through the hot path's connection, where
        redis-py's pipeline costs ~20 µs a command: 5,000 names took 200 ms)."""
        names = await self.names()
        busy = {n: q + r for n, (q, r) in (await self.backlog(names)).items()}
        ordered = sorted(names, key=lambda n: (-busy[n], n))
        return len(names), await self.queues(ordered[offset : offset + count])

    async def running(
        self, names: Sequence[str] | None = None, pools: Sequence[LivePool] | None = None
    ) -> list[RunningJob]:
        """The jobs running now, longest running first (see :meth:`Shard.running`). Their
        checkin messages come from ``pools``, else from the snapshots in shard 0 (a
        pool over several shards writes its snapshot there only)."""
        names = await self.names() if names is None else list(names)
        if pools is None and self._route.count > 1:
            pools = await self._route.all[0].pools()
        each = await self._route.each(lambda s: s.running(names, pools))
        return sorted((r for rows in each for r in rows), key=lambda r: (r.since, r.job_id))

    async def job_set_sizes(self) -> dict[str, int]:
        """How many jobs the scheduled, retry, dead and waiting sets hold, in one round
        trip per shard."""
        return add_counts(await self._route.each(Shard.job_set_sizes))

    async def stats(self) -> dict[str, int]:
        """Counters since the namespace began: processed, failed, dead, ... and per name."""
        return add_counts(await self._route.each(Shard.stats))

    async def history(
        self, minutes: int = 60, days: int = 30, *, at: float | None = None
    ) -> History:
        """Counters per minute for the last ``minutes`` minutes and per day for the last
        ``days`` days (UTC), read in one round trip per shard. ``at``: the present, in
        epoch seconds. Per-minute buckets are kept 2 hours and per-day ones 90 days."""
        each = await self._route.each(lambda s: s.history(minutes, days, at=at))
        return History(
            [merge_bucket(b) for b in zip(*(h.minutes for h in each), strict=True)],
            [merge_bucket(b) for b in zip(*(h.days for h in each), strict=True)],
        )

    async def pools(self) -> list[LivePool]:
        """Live pools, oldest first, each with the time of its last heartbeat and whether
        it is stale (see :meth:`Shard.pools`). A pool writes its snapshot and, on one
        server, its score in shard 0 (its snapshot in every shard before, and in other
        languages perhaps still): each is listed once, by its freshest snapshot's beat."""
        latest: dict[str, LivePool] = {}
        for pools in await self._route.each(Shard.pools):
            for pool in pools:
                seen = latest.get(pool.id)
                if seen is None or pool.last_heartbeat > seen.last_heartbeat:
                    latest[pool.id] = pool
        return sorted(latest.values(), key=lambda p: p.started_at)

    async def page(self, which: JobSet, offset: int = 0, count: int = 50) -> Page:
        """A page of the scheduled, retry, dead (newest first) or waiting set, in the
        set's order: one shard's first ``offset + count``; several merged (pages.py)."""
        if self._route.count > 1:  # exact at any depth
            total, chosen = await job_set_page(self.shards, which, offset, count)
            return Page(total, offset, await self._records(chosen))
        each = await self._route.each(lambda s: s.scored(which, offset + count))
        desc = which == "dead"
        rows = heapq.merge(
            *([(score, job_id, i) for score, job_id in got] for i, (_, got) in enumerate(each)),
            key=lambda r: (-r[0] if desc else r[0], r[1]),
        )
        chosen = [(i, job_id) for _, job_id, i in list(rows)[offset : offset + count]]
        return Page(sum(t for t, _ in each), offset, await self._records(chosen))

    async def _records(self, chosen: list[tuple[int, str]]) -> list[JobRecord]:
        """The records of ``chosen`` (a shard's index, a job id), in order, one round
        trip per shard that holds some, all at once; one gone since is left out."""
        each = await self._route.each(lambda s: s.records([j for i, j in chosen if i == s.index]))
        records = {r.id: r for found in each for r in found}
        return [records[j] for _, j in chosen if j in records]

    async def search(
        self,
        which: SearchedSet,
        text: str,
        offset: int = 0,
        count: int = 50,
        *,
        scan: int = SEARCH_LIMIT,
        start: int = 0,
        budget: float | None = None,
        fields: Fields = "id",
    ) -> Found:
        """A page of the jobs of a set (or of the kept complete jobs) that match ``text``
        (any case): by id and name (``fields="id"``, the default: one short field read a
        job), or by their content too (``"content"``: args and kwargs, error type and
        message, reason, result; see :mod:`rota.client.scan`). Every shard's set is
        searched from ``start``, each with its share of ``scan`` and ``budget``; the
        matches of all, the figures added up, and the records of the page's only."""
        checked("offset", offset, POSITION)
        checked("count", count, JOBS)
        checked("start", start, POSITION)
        checked("scan", scan, POSITION)  # 0: one job, as 1; as far as a place goes
        checked_scan(fields, budget)
        k = self._route.count
        share = None if budget is None else budget / k
        at = start
        if k > 1:  # ``start`` counts the jobs read over every shard: the place in each
            sizes = await self._route.each(lambda s: s.redis.zcard(s.job_set_key(which)))
            at = shard_position(start, sizes)
        each = await self._route.each(
            lambda s: scan_set(
                s.conn,
                s.keys,
                (s.job_set_key(which), which in NEWEST_FIRST),
                text,
                max(1, scan // k),
                at,
                share,
                fields,
            )
        )
        # Every shard read its set up to the nearest place where one stopped: what lies
        # beyond it on the others is left to the search that goes on from there.
        stop = min((read for _, read, size in each if read < size), default=None)
        hits = [
            (score, job_id, i)
            for i, (found, _, _) in enumerate(each)
            for place, score, job_id in found
            if stop is None or place < stop
        ]
        if k > 1:  # in the set's order over the shards, as a page (see :meth:`page`)
            sign = -1 if which in NEWEST_FIRST else 1
            hits.sort(key=lambda h: (sign * h[0], h[1]))
        chosen = [(i, job_id) for _, job_id, i in hits]
        jobs = await self._records(chosen[offset : offset + count])
        sizes = [size for _, _, size in each]
        searched = sum(size if stop is None else min(stop, size) for size in sizes)
        begun = start if k == 1 else sum(min(at, size) for size in sizes)
        return Found(len(chosen), offset, jobs, searched, sum(sizes), begun)

    #: A page of the kept complete jobs (:func:`rota.client.finished.finished`).
    finished = on_route(finished)

    async def in_set(self, which: JobSet, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` the scheduled, retry, dead or waiting set holds now: what an
        operator is told about ids that are not there."""
        held = {
            i for found in await self._route.each(lambda s: s.in_set(which, ids)) for i in found
        }
        return [i for i in ids if i in held]

    async def retry(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        """Move jobs of a set to their queues now: the given ids, or all when None. A
        waiting job runs when what it waits for completes: it cannot be moved."""
        return sum(await self._route.each(lambda s: s.retry(which, ids)))

    async def delete(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        """Delete jobs of a set: the given ids, or all when None."""
        return sum(await self._route.each(lambda s: s.delete(which, ids)))
