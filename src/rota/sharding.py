"""One namespace over K shards, seen from the client: route by id, merge what is read.

A client of a namespace with ``shards`` > 1 holds one *part* per shard (see
:mod:`rota.protocol.shards`): a client of its own over that shard's keys and, in a
cluster, over a connection to the node that owns the shard's slot. Part 0 is the client
itself. :class:`Sharded` is the client's base that makes the parts one namespace again:

- what names a job (read it, wait for it, abort it, its log, its ties) goes to the
  shard its id names, then to the others for an id a producer chose;
- what names a job name (pause, resume, a limit, a rate, clearing a queue) goes to
  every shard: a concurrency limit of n is split n // K (plus one for the first
  n % K shards), so the shards together never run more than n; a rate is split evenly;
- what counts (queues, job sets, stats, history, pools, running jobs, pages, search)
  is read from every shard and merged.

With one shard every method is the one-shard method itself (``super()``), unchanged.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self, TypeVar, cast

from rota.operations import SEARCH_LIMIT, Operations
from rota.protocol.bounds import HANDLER, checked
from rota.protocol.job import JobRecord, JobSet, reply_text, validate_name
from rota.protocol.rate import Rate, parse_rate
from rota.protocol.shards import shard_of
from rota.reads import Reads
from rota.shard_rules import (
    add_counts,
    gather,
    merge_bucket,
    merge_queue,
    split_limit,
    split_rate,
)
from rota.status import Found, History, LivePool, Page, QueueInfo, RunningJob
from rota.workflow import Related, Workflows

__all__ = ["Sharded"]

T = TypeVar("T")


class Sharded(Reads, Operations, Workflows):
    """The client's view of every shard of its namespace (see the module)."""

    #: One client per shard, this one first; ``(self,)`` for one shard and for a part.
    parts: tuple[Sharded, ...]
    #: How many shards the namespace spans (the same in every part).
    shard_count: int

    async def _each(self, call: Callable[[Sharded], Awaitable[T]]) -> list[T]:
        """``call`` on every part at once, the results in shard order."""
        return await gather([functools.partial(call, part) for part in self.parts])

    @property
    def alone(self) -> Sharded:
        """This part's own shard, read and changed without the others (its methods
        without the merging of this class): what a per-shard view shows."""
        return _base(self)

    async def _part_of(self, job_id: str) -> Sharded:
        """The part whose shard holds ``job_id``: the one its id names when it has the
        job (one read), else (an id a producer chose, routed by its unique key or group)
        the one of the others that has its record; the one its id names when none has."""
        home = self.parts[shard_of(job_id, self.shard_count)]
        if len(self.parts) == 1 or await home.redis.exists(home.keys.job(job_id)):
            return home
        return (await self._holders([job_id])).get(job_id, home)

    async def _holders(self, ids: Sequence[str]) -> dict[str, Sharded]:
        """The part whose shard holds each of ``ids`` that the shard its id names does
        not (an id a producer chose, routed by its unique key or group): every other
        shard asked at once, one pipeline each whatever the number of ids; an id none
        holds is left out."""
        k = self.shard_count

        async def ask(part: Sharded) -> list[tuple[str, Sharded]]:
            asked = [i for i in ids if self.parts[shard_of(i, k)] is not part]
            if not asked:
                return []
            async with part.redis.pipeline(transaction=False) as pipe:
                for job_id in asked:
                    pipe.exists(part.keys.job(job_id))
                found = await pipe.execute()
            return [(i, part) for i, n in zip(asked, found, strict=True) if n]

        each = await gather([functools.partial(ask, part) for part in self.parts])
        return {i: part for held in each for i, part in held}

    async def part_holding(self, job_id: str) -> Self:
        """The part (a client of one shard) whose shard holds ``job_id`` (see
        :meth:`_part_of`): where a view reads a job and its ties in one round trip. This
        client itself with one shard, without a read."""
        return cast(Self, await self._part_of(job_id))

    # -- one job: to its shard --------------------------------------------------------

    async def job(self, job_id: str) -> JobRecord | None:
        if len(self.parts) == 1:
            return await super().job(job_id)
        # The shard the id names first (one read); the others only for an id a producer
        # chose that is not there (routed by its unique key or group).
        record = await _base(self.parts[shard_of(job_id, self.shard_count)]).job(job_id)
        if record is None and (part := (await self._holders([job_id])).get(job_id)):
            return await _base(part).job(job_id)
        return record

    async def stored(self, job_id: str, field: Any) -> bytes | None:
        if len(self.parts) == 1:
            return await super().stored(job_id, field)
        return await _base(await self._part_of(job_id)).stored(job_id, field)

    async def job_log(self, job_id: str) -> list[str]:
        if len(self.parts) == 1:
            return await super().job_log(job_id)
        return await _base(await self._part_of(job_id)).job_log(job_id)

    async def wait(self, job_id: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        if len(self.parts) == 1:
            return await super().wait(job_id, timeout)
        return await _base(await self._part_of(job_id)).wait(job_id, timeout)

    async def abort(self, job_id: str, *, keep: float = 3600.0) -> str:
        if len(self.parts) == 1:
            return await super().abort(job_id, keep=keep)
        return await _base(await self._part_of(job_id)).abort(job_id, keep=keep)

    async def dependency_results(self, job_id: str) -> dict[str, Any]:
        if len(self.parts) == 1:
            return await super().dependency_results(job_id)
        return await _base(await self._part_of(job_id)).dependency_results(job_id)

    async def children(self, job_id: str) -> list[str]:
        if len(self.parts) == 1:
            return await super().children(job_id)
        return await _base(await self._part_of(job_id)).children(job_id)

    async def related(self, ids: Sequence[str]) -> list[Related]:
        if len(self.parts) == 1:
            return await super().related(ids)
        # Each id is read in the shard it names, one round trip per shard and all at
        # once; one found missing there (an id a producer chose, routed by its unique
        # key or group) is looked for in the others.
        named: dict[int, list[int]] = {}
        for at, job_id in enumerate(ids):
            named.setdefault(shard_of(job_id, self.shard_count), []).append(at)
        shards = list(named)
        found = await gather(
            [
                functools.partial(_base(self.parts[s]).related, [ids[at] for at in named[s]])
                for s in shards
            ]
        )
        out: dict[int, Related] = {}
        for s, rows in zip(shards, found, strict=True):
            out.update(zip(named[s], rows, strict=True))
        missing = [at for at, row in out.items() if row.state == "missing"]
        holders = await self._holders([ids[at] for at in missing]) if missing else {}
        moved: dict[int, list[int]] = {}  # part -> the places of the ids it holds
        for at in missing:
            if (part := holders.get(ids[at])) is not None:
                moved.setdefault(self.parts.index(part), []).append(at)
        again = await gather(
            [
                functools.partial(_base(self.parts[s]).related, [ids[at] for at in places])
                for s, places in moved.items()
            ]
        )
        for places, rows in zip(moved.values(), again, strict=True):
            out.update(zip(places, rows, strict=True))
        return [out[at] for at in range(len(ids))]

    async def group_progress(self, group_id: str) -> Any:
        if len(self.parts) == 1:
            return await super().group_progress(group_id)
        return await _base(self.parts[shard_of(group_id, self.shard_count)]).group_progress(
            group_id
        )

    async def group_members(self, group_id: str, offset: int = 0, count: int = 100) -> list[str]:
        if len(self.parts) == 1:
            return await super().group_members(group_id, offset, count)
        part = self.parts[shard_of(group_id, self.shard_count)]
        return await _base(part).group_members(group_id, offset, count)

    # -- one job name: every shard ----------------------------------------------------

    async def pause(self, name: str) -> None:
        if len(self.parts) == 1:
            return await super().pause(name)
        await self._each(lambda p: _base(p).pause(name))

    async def resume(self, name: str) -> None:
        if len(self.parts) == 1:
            return await super().resume(name)
        await self._each(lambda p: _base(p).resume(name))

    async def set_limit(self, name: str, limit: int | None) -> None:
        """Cap how many jobs of ``name`` run at once across all pools (None: no cap).
        Over K shards each gets its part (see :func:`split_limit`); a limit below K
        would leave some shard's jobs of the name no room at all, and is refused."""
        if len(self.parts) == 1:
            return await super().set_limit(name, limit)
        validate_name(name)
        k = self.shard_count
        if limit is not None and checked("limit", limit, HANDLER["max_concurrency"]) < k:
            raise ValueError(
                f"a concurrency limit of {limit} over {k} shards leaves some shard none:"
                f" give at least {k}"
            )
        await self._each(
            lambda p: _base(p).set_limit(
                name, None if limit is None else split_limit(limit, k, p.keys.shard)
            )
        )

    async def set_rate(self, name: str, rate: str | Rate | None) -> None:
        if len(self.parts) == 1:
            return await super().set_rate(name, rate)
        part = None if rate is None else split_rate(parse_rate(rate), self.shard_count)
        await self._each(lambda p: _base(p).set_rate(name, part))

    async def clear_queue(self, name: str) -> int:
        if len(self.parts) == 1:
            return await super().clear_queue(name)
        return sum(await self._each(lambda p: _base(p).clear_queue(name)))

    async def forget_idle_names(
        self, after: float, chunk: int = 500, *, turn: float | None = None
    ) -> list[str]:
        if len(self.parts) == 1:
            return await super().forget_idle_names(after, chunk, turn=turn)
        each = await self._each(lambda p: _base(p).forget_idle_names(after, chunk, turn=turn))
        return sorted({n for names in each for n in names})

    # -- what counts: every shard, merged ---------------------------------------------

    async def names(self) -> list[str]:
        if len(self.parts) == 1:
            return await super().names()
        return sorted({n for names in await self._each(lambda p: _base(p).names()) for n in names})

    async def queues(self, names: Sequence[str] | None = None) -> list[QueueInfo]:
        if len(self.parts) == 1:
            return await super().queues(names)
        names = await self.names() if names is None else list(names)
        each = await self._each(lambda p: _base(p).queues(names))
        return [merge_queue(rows, self.shard_count) for rows in zip(*each, strict=True)]

    async def queue_page(self, offset: int = 0, count: int = 100) -> tuple[int, list[QueueInfo]]:
        if len(self.parts) == 1:
            return await super().queue_page(offset, count)
        names = await self.names()
        busy = dict.fromkeys(names, 0)
        for counts in await self._each(lambda p: p.backlog(names)):
            for name, (queued, running) in counts.items():
                busy[name] += queued + running
        ordered = sorted(names, key=lambda n: (-busy[n], n))
        return len(names), await self.queues(ordered[offset : offset + count])

    async def running(
        self, names: Sequence[str] | None = None, pools: Sequence[LivePool] | None = None
    ) -> list[RunningJob]:
        if len(self.parts) == 1:
            return await super().running(names, pools)
        names = await self.names() if names is None else list(names)
        pools = await self.pools() if pools is None else pools
        each = await self._each(lambda p: _base(p).running(names, pools))
        return sorted((r for rows in each for r in rows), key=lambda r: (r.since, r.job_id))

    async def job_set_sizes(self) -> dict[str, int]:
        if len(self.parts) == 1:
            return await super().job_set_sizes()
        return add_counts(await self._each(lambda p: _base(p).job_set_sizes()))

    async def stats(self) -> dict[str, int]:
        if len(self.parts) == 1:
            return await super().stats()
        return add_counts(await self._each(lambda p: _base(p).stats()))

    async def history(
        self, minutes: int = 60, days: int = 30, *, at: float | None = None
    ) -> History:
        if len(self.parts) == 1:
            return await super().history(minutes, days, at=at)
        each = await self._each(lambda p: _base(p).history(minutes, days, at=at))
        return History(
            [merge_bucket(b) for b in zip(*(h.minutes for h in each), strict=True)],
            [merge_bucket(b) for b in zip(*(h.days for h in each), strict=True)],
        )

    async def pools(self) -> list[LivePool]:
        """Every pool beats in every shard: each is listed once, by its freshest beat."""
        if len(self.parts) == 1:
            return await super().pools()
        each = await self._each(lambda p: _base(p).pools())
        latest: dict[str, LivePool] = {}
        for pool in (p for pools in each for p in pools):
            seen = latest.get(pool.id)
            if seen is None or pool.last_heartbeat > seen.last_heartbeat:
                latest[pool.id] = pool
        return sorted(latest.values(), key=lambda p: p.started_at)

    async def page(self, which: JobSet, offset: int = 0, count: int = 50) -> Page:
        """A page of a job set over every shard, in the set's order (by score; the dead
        newest first): each shard's first ``offset + count``, merged."""
        if len(self.parts) == 1:
            return await super().page(which, offset, count)
        each = await self._each(lambda p: p._scored(which, offset + count))
        total = sum(t for t, _ in each)
        desc = which == "dead"
        rows = heapq.merge(
            *(
                [(score, job_id, i) for score, job_id in entries]
                for i, (_, entries) in enumerate(each)
            ),
            key=lambda r: (-r[0] if desc else r[0], r[1]),
        )
        chosen = list(rows)[offset : offset + count]
        records: dict[str, JobRecord] = {}
        for i, part in enumerate(self.parts):
            ids = [job_id for _, job_id, s in chosen if s == i]
            if ids:
                records.update({r.id: r for r in await part._records(ids)})
        return Page(total, offset, [records[j] for _, j, _ in chosen if j in records])

    async def search(
        self,
        which: JobSet,
        text: str,
        offset: int = 0,
        count: int = 50,
        *,
        scan: int = SEARCH_LIMIT,
        start: int = 0,
        budget: float | None = None,
    ) -> Found:
        """A search of every shard's set (each from ``start``, each with its share of
        ``scan`` and ``budget``): the matches of all, the figures added up."""
        if len(self.parts) == 1:
            return await super().search(
                which, text, offset, count, scan=scan, start=start, budget=budget
            )
        k = self.shard_count
        share = None if budget is None else budget / k
        each = await self._each(
            lambda p: _base(p).search(
                which, text, 0, offset + count, scan=max(1, scan // k), start=start, budget=share
            )
        )
        jobs = [j for found in each for j in found.jobs][offset : offset + count]
        return Found(
            sum(f.total for f in each),
            offset,
            jobs,
            sum(f.searched for f in each),
            sum(f.size for f in each),
            start,
        )

    async def in_set(self, which: JobSet, ids: Sequence[str]) -> list[str]:
        if len(self.parts) == 1:
            return await super().in_set(which, ids)
        held = {
            i for found in await self._each(lambda p: _base(p).in_set(which, ids)) for i in found
        }
        return [i for i in ids if i in held]

    async def retry(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        if len(self.parts) == 1:
            return await super().retry(which, ids)
        return sum(await self._each(lambda p: _base(p).retry(which, ids)))

    async def delete(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        if len(self.parts) == 1:
            return await super().delete(which, ids)
        return sum(await self._each(lambda p: _base(p).delete(which, ids)))

    # -- one shard's reads, for the merges above ---------------------------------------

    async def _scored(self, which: JobSet, stop: int) -> tuple[int, list[tuple[float, str]]]:
        """This shard's size of a job set and its first ``stop`` entries, with scores."""
        z = self._set_key(which)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(z)
            pipe.zrange(z, 0, stop - 1, desc=which == "dead", withscores=True)
            total, rows = await pipe.execute()
        return total, [(float(score), reply_text(i)) for i, score in rows]


def _base(part: Sharded) -> Sharded:
    """``part`` as one shard: its methods without the merging of :class:`Sharded`."""
    return super(Sharded, part)  # type: ignore[return-value]
