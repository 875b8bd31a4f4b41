"""How a namespace's shards are one namespace again: the routing rules, in one table.

======== ================================================================ ==============
rule     where a call goes                                                 used by
======== ================================================================ ==============
by id    the shard a job's id names; for an id a producer chose (routed    job, wait,
         by its unique key or group), the others that hold it when that    abort, a job's
         one has none                                                      log and ties
by group the shard a group's id names                                      a group's reads
to all   every shard at once, the answers merged (a job name's pause,      the operator's
         limit, rate; every count, page and search)                        (Admin)
by key   each enqueue row to the shard of its group, its unique key, its   enqueue,
         first parent, its fair key, its name if the name is ordered,      chain, group
         else its id (:func:`rota.protocol.shards.shard_of_row`)
======== ================================================================ ==============

One shard goes through the same rules: its id names it, "every shard" is it, and there
are no others to ask.

During a change of the shard count (see :mod:`rota.protocol.reshard`) "every shard" is
the union of the old and the new shards, new jobs are routed by the new count, and what
may exist already (a job by id, a group, a unique or debounce key's holder, a parent) is
looked for in its old home first (its route under the old count), then in its new one;
an ordered name whose old home still holds queued jobs of it is sent there, until that
queue is empty (so that its jobs start in order across the change).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from rota.client.rules import gather
from rota.client.shard import Shard
from rota.client.workflow import MISSING
from rota.errors import JobNotFound
from rota.protocol.keys import tag_of
from rota.protocol.reshard import ShardRecord
from rota.protocol.rows import EnqueueRow
from rota.protocol.shards import shard_of, shard_of_row, shard_tags

__all__ = ["Shards", "on_route"]

T = TypeVar("T")
P = ParamSpec("P")


class Shards:
    """The shards of one namespace, in order, and the rules above over them."""

    def __init__(self, shards: Sequence[Shard], record: ShardRecord | None = None) -> None:
        self.follow(shards, record or ShardRecord(len(shards), len(shards)))
        #: Read the shard record again and follow it: whether it changed (see
        #: rota.client.follow); None reads none.
        self.reread: Callable[[], Awaitable[bool]] | None = None

    def follow(self, shards: Sequence[Shard], record: ShardRecord) -> None:
        """Serve ``shards``, the tags of ``record`` in its order (the new count's, then
        the old one's not among them), and route as it says."""
        #: Every shard served: what a call "to all" reaches, and what a limit is split
        #: over (the union during a change).
        self.all = tuple(shards)
        self.count = len(self.all)
        self.record = record
        #: How many shards new jobs are routed over (the first of :attr:`all`).
        self.routing = record.new
        self.old: tuple[Shard, ...] = ()  # the old count's shards, in order, during a change
        if record.changing:
            by_tag = {tag_of(s.keys.prefix): s for s in self.all}
            namespace = self.all[0].keys.namespace
            self.old = tuple(by_tag[t] for t in shard_tags(namespace, record.old))
        for i, shard in enumerate(self.all):
            shard.place(i, self.count, record.generation)

    def named(self, some_id: str) -> Shard:
        """The shard an id names (a job's, a group's): where it goes when new."""
        return self.all[shard_of(some_id, self.routing)]

    def home(self, some_id: str) -> Shard:
        """Where what ``some_id`` names is looked for first: its old home during a
        change (it may be from before), else the shard it names."""
        if self.old:
            return self.old[shard_of(some_id, len(self.old))]
        return self.named(some_id)

    async def by_id(
        self,
        job_id: str,
        read: Callable[[Shard], Awaitable[T]],
        missing: Callable[[T], bool] = operator.not_,
    ) -> T:
        """``read`` in the shard ``job_id`` names; when it answers ``missing`` (or
        raises JobNotFound) and another shard holds the job, ``read`` there. Found
        nowhere, the shard record is read again (:attr:`reread`): when the count
        changed since, the job is looked for over the shards it names now."""

        async def once() -> T:
            try:
                answer = await read(self.home(job_id))
            except JobNotFound:
                if (there := (await self.holders([job_id])).get(job_id)) is None:
                    raise
                return await read(there)
            if missing(answer) and (there := (await self.holders([job_id])).get(job_id)):
                return await read(there)
            return answer

        try:
            answer = await once()
        except JobNotFound:
            if not await self._changed():
                raise
            return await once()
        if missing(answer) and await self._changed():
            return await once()
        return answer

    async def _changed(self) -> bool:
        return self.reread is not None and await self.reread()

    async def holding(self, job_id: str) -> Shard:
        """The shard that holds ``job_id``: the one its id names when it has the job (one
        read, none when there are no others to ask), else the one of the others that
        has its record; the one its id names when none has."""
        home = self.home(job_id)
        others = [s for s in self.all if s is not home]
        if not others or await home.redis.exists(home.keys.job(job_id)):
            return home
        return (await self.holders([job_id])).get(job_id, home)

    async def holders(self, ids: Sequence[str]) -> dict[str, Shard]:
        """The shard that holds each of ``ids`` that its :meth:`home` does not:
        every other shard asked at once, one pipeline each whatever the number of ids;
        an id none holds is left out."""

        async def ask(shard: Shard) -> list[tuple[str, Shard]]:
            asked = [i for i in ids if self.home(i) is not shard]
            if not asked:
                return []
            found = await shard.piped(lambda p: [p.exists(shard.keys.job(i)) for i in asked])
            return [(i, shard) for i, n in zip(asked, found, strict=True) if n]

        each = await self.each(ask)
        return {i: shard for held in each for i, shard in held}

    async def each(self, call: Callable[[Shard], Awaitable[T]]) -> list[T]:
        """``call`` on every shard at once, the results in shard order."""
        return await gather([functools.partial(call, shard) for shard in self.all])

    async def by_key(
        self,
        rows: list[EnqueueRow],
        send: Callable[[Shard, list[EnqueueRow]], Awaitable[list[T]]],
        placed: Mapping[str, int] | None = None,
        chosen: frozenset[str] = frozenset(),
    ) -> list[T]:
        """Send each row to its shard, every shard's rows at once, and answer in the
        rows' order. A row after another of the same call goes where that one goes (its
        chosen id may name another shard), as does one after a job a caller placed
        (``placed``: the shards of such jobs, by id). ``chosen``: the ids the producer
        chose (during a change, one that exists in its old home is sent there)."""
        places: dict[int, Shard] = {}
        went = dict(placed or {})  # the shard of each row so far (and known), by id
        if self.old:
            went.update(await self._from_before(rows, went, chosen))
        for i, row in enumerate(rows):
            went[row.id] = shard = went.get(row.id, shard_of_row(row, self.routing, went))
            places[i] = self.all[shard]
        sent = await _at(places, lambda s, at: send(s, [rows[i] for i in at]))
        return [sent[i] for i in range(len(rows))]

    async def related(
        self,
        ids: Sequence[str],
        read: Callable[..., Awaitable[list[T]]],
        missing: Callable[[T], bool] = lambda row: getattr(row, "state", "") == MISSING,
    ) -> list[T]:
        """``read(shard, ids)`` by id for many ids (see :meth:`by_id`): each read in the
        shard it names, one round trip per shard and all at once; one found ``missing``
        there (by default: its ``state`` is ``"missing"``) is looked for in the others."""
        of = lambda s, at: read(s, [ids[i] for i in at])  # noqa: E731
        out = await _at({at: self.home(i) for at, i in enumerate(ids)}, of)
        lost = [ids[at] for at, row in out.items() if missing(row)]
        held = await self.holders(lost) if lost else {}
        places = {at: held[i] for at, i in enumerate(ids) if i in held}
        out.update(await _at(places, of))
        return [out[at] for at in range(len(ids))]

    async def _from_before(
        self, rows: Sequence[EnqueueRow], went: Mapping[str, int], chosen: frozenset[str]
    ) -> dict[str, int]:
        """During a change: the rows that must go to their old home, by id, with its
        place: a member or callback of a group that exists there, a row whose unique key
        a live job holds there or whose debounce key is held there (the script answers
        with the holder), a child of a parent there, a row whose chosen id exists there
        (nothing is enqueued for it). One read per such row, all at once; a row with
        none of these asks nothing."""

        async def ask(row: EnqueueRow) -> tuple[str, int] | None:
            group = row.group or row.waits_group
            if group:
                old = self.home(group)
                found = old is not self.named(group) and await old.redis.exists(
                    old.keys.group(group)
                )
            elif row.unique:
                old = self.home(row.unique)
                holder = (
                    None
                    if old is self.named(row.unique)
                    else await old.redis.get(old.keys.unique(row.unique))
                )
                found = bool(holder) and bool(
                    await old.redis.exists(old.keys.job(holder.decode()))  # type: ignore[union-attr]
                )
            elif row.debounce_key:
                old = self.home(row.debounce_key)
                found = old is not self.named(row.debounce_key) and await old.redis.exists(
                    old.keys.debounce(row.debounce_key)
                )
            elif row.after and (parent := row.after.split()[0]) not in went:
                old = await self.holding(parent)
                found = old is not self.named(parent)
            elif row.id in chosen:
                old = self.home(row.id)
                found = old is not self.named(row.id) and await old.redis.exists(
                    old.keys.job(row.id)
                )
            else:
                return None
            return (row.id, old.index) if found else None

        keyed = [r for r in rows if _keyed(r) or r.id in chosen]
        found = {a[0]: a[1] for a in await gather([functools.partial(ask, r) for r in keyed]) if a}
        return found | await self._names_before(rows, found)

    async def _names_before(
        self, rows: Sequence[EnqueueRow], found: Mapping[str, int]
    ) -> dict[str, int]:
        """During a change: the rows routed by an ordered name (see
        :func:`rota.protocol.shards.shard_of_row`) whose name still has jobs queued in
        its old home, by id, with that place: a name stays there until its queue there
        is empty, so that its jobs start in enqueue order across the change too. One
        ``LLEN`` per such name, all at once; a call with none asks nothing."""
        by_name = [
            r
            for r in rows
            if r.ordered and not (_keyed(r) or r.fair) and r.id not in found
            if self.home(r.name) is not self.named(r.name)
        ]
        if not by_name:
            return {}

        async def queued(name: str) -> tuple[str, int] | None:
            old = self.home(name)
            return (name, old.index) if await old.redis.llen(old.keys.queue(name)) else None

        names = {r.name for r in by_name}
        held = dict(a for a in await gather([functools.partial(queued, n) for n in names]) if a)
        return {r.id: held[r.name] for r in by_name if r.name in held}


def _keyed(row: EnqueueRow) -> bool:
    """Whether ``row`` is routed by a key that may exist from before a change."""
    return bool(row.group or row.waits_group or row.unique or row.debounce_key or row.after)


async def _at(
    places: dict[int, Shard], call: Callable[[Shard, list[int]], Awaitable[list[T]]]
) -> dict[int, T]:
    """``call(shard, places)`` with the places (in a list of rows or ids) each shard
    serves, one call per shard, all at once; the answers by place."""
    by_shard: dict[Shard, list[int]] = {}
    for at, shard in places.items():
        by_shard.setdefault(shard, []).append(at)
    found = await gather([functools.partial(call, s, at_s) for s, at_s in by_shard.items()])
    rows = zip(by_shard.values(), found, strict=True)
    return {at: row for at_s, got in rows for at, row in zip(at_s, got, strict=True)}


def on_route(
    read: Callable[Concatenate[Shards, P], Awaitable[T]],
) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """``read`` of a namespace's shards as a method of an object that routes over them
    (``self._route``): one signature, the function's, instead of a method that passes
    every argument on."""

    @functools.wraps(read)
    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await read(self._route, *args, **kwargs)

    return method
