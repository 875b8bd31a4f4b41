"""The operator's reads and writes of one shard: queues, job sets, pools, stats, limits,
read in as few round trips as the data allows.

:class:`ShardOperations` is the base of :class:`rota.client.shard.Shard`, which provides
the connections, the key names and the script scope; it is kept apart so that a shard's
producer reads stay short to read. :class:`rota.client.admin.Admin` runs these on every
shard and merges them; what each means for the operator is said there.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from rota.client.forget import forget_idle_names
from rota.client.scan import SEARCH_LIMIT, SearchedSet
from rota.client.status import Bucket, History, LivePool, QueueInfo, RunningJob
from rota.protocol import operator_calls, read_calls
from rota.protocol.calls import Scope
from rota.protocol.job import (
    JobRecord,
    JobSet,
    count_of,
    field_seconds,
    field_text,
    now_ms,
    opt_int,
    reply_int,
    reply_text,
    validate_name,
)
from rota.protocol.keys import Keys
from rota.protocol.rate import Rate
from rota.protocol.snapshot import PoolSnapshot
from rota.wire.conn import Conn
from rota.wire.redispy import Pipeline, Redis, ReplyError

__all__ = ["SEARCH_LIMIT", "ShardOperations"]

_CHUNK = 500
#: Names whose keyed counts one ``EXISTS`` asks about (see :meth:`ShardOperations.backlog`).
_EXISTS = 100


class ShardOperations:
    """Read and operate the queues and job sets of one shard (see the module)."""

    redis: Redis
    #: The bare connection when there is one (cheap for thousands of commands at once).
    conn: Conn
    keys: Keys
    scope: Scope

    async def piped(self, build: Callable[[Pipeline], object], *, errors: bool = True) -> list[Any]:
        """The replies of the commands ``build`` puts on a pipeline of :attr:`redis`: one
        round trip, none for no command. ``errors=False``: an error reply is answered in
        its place, not raised (see :func:`rota.client.workflow.pipelined`)."""
        pipe = self.redis.pipeline(transaction=False)
        build(pipe)
        return list(await pipe.execute(raise_on_error=errors))

    async def records(self, ids: Sequence[str]) -> list[JobRecord]:
        hashes = await self.piped(lambda p: [p.hgetall(self.keys.job(i)) for i in ids])
        return [JobRecord.from_hash(i, h) for i, h in zip(ids, hashes, strict=True) if h]

    async def names(self) -> list[str]:
        return sorted(reply_text(n) for n in await self.redis.smembers(self.keys.names))

    async def queues(self, names: Sequence[str]) -> list[QueueInfo]:
        """Every figure of each queue, in two round trips on :attr:`conn` (through
        redis-py's pipeline, 40,000 commands for 5,000 names took a second); an error
        reply (a key of another type) raises, as a pipeline does."""
        k = self.keys
        reads: list[tuple[str, ...]] = []
        for name in names:
            q = k.queue(name)
            reads += [("LLEN", q), ("LINDEX", q, "-1"), ("ZCARD", k.running(name))]
            reads += [("HGET", k.limits, name), ("SISMEMBER", k.paused, name)]
            reads += [("HGET", k.priorities, name), ("HGET", k.rates, name)]
            reads.append(("HGET", k.fair(name), "n"))  # its keyed jobs queued (lua/_fair.lua)
        rows = await self.conn.execute_many(reads)
        for row in rows:
            if isinstance(row, Exception):
                raise row
        oldest = [rows[i * 8 + 1] for i in range(len(names))]
        # Only the queues that hold a job are read (no placeholder command for an empty
        # one: a read-only ACL role may run nothing but reads).
        held = [reply_text(job_id) for job_id in oldest if job_id]
        # (A record that is no hash answers an error, in its place.)
        read = iter(await self.conn.execute_many([("HGET", k.job(i), "enqueued_at") for i in held]))
        enqueued: list[Any] = [next(read) if job_id else None for job_id in oldest]
        now = now_ms()
        out = []
        for i, name in enumerate(names):
            size, _, running, limit, paused, priority, rate, keyed = rows[i * 8 : i * 8 + 8]
            size += count_of(keyed)
            e = enqueued[i]
            at = None if isinstance(e, Exception) else opt_int(e)
            age = max(0.0, (now - at) / 1000) if at else 0.0
            out.append(
                QueueInfo(
                    name,
                    size,
                    age,
                    running,
                    opt_int(limit),
                    bool(paused),
                    opt_int(priority),
                    _rate_text(rate),
                )
            )
        return out

    async def forget_idle_names(
        self,
        after: float,
        chunk: int = 500,
        *,
        turn: float | None = None,
        snapshots: ShardOperations | None = None,
    ) -> list[str]:
        """:func:`rota.client.forget.forget_idle_names` in this shard alone."""
        return await forget_idle_names([self], after, chunk, turn=turn, snapshots=snapshots)

    async def backlog(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Queued (plain and keyed) and running jobs of each name: one call of the
        read-only function ``backlog`` (``lua/backlog.lua``), whatever the number of
        names, where the server runs it for this user; else by plain commands
        (:meth:`backlog_piped`)."""
        # on the bare connection: redis-py packs 5,000 arguments in Python (30 µs each)
        counts = await read_calls.backlog(self.scope.on(self.conn), names)
        if counts is None:
            return await self.backlog_piped(names)
        return {n: (counts[2 * i], counts[2 * i + 1]) for i, n in enumerate(names)}

    async def backlog_total(self) -> tuple[int, int]:
        """Queued and running jobs over the names this shard knows (its own
        ``Keys.names``: an enqueue into a shard adds the name there): one call of
        ``backlog``, else its names and :meth:`backlog_piped` of them."""
        counts = await read_calls.backlog(self.scope, None)
        if counts is not None:
            return counts[0], counts[1]
        each = (await self.backlog_piped(await self.names())).values()
        return sum(q for q, _ in each), sum(r for _, r in each)

    async def backlog_piped(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """:meth:`backlog` by plain commands (a server without functions, a role that
        may not call ``backlog``), in two round trips on :attr:`conn`, at most about
        one command a name: first the names whose running set
        may hold leases (``Keys.leased``: a fetch adds the name it leases, the reaper
        removes those left with none) and, by an ``EXISTS`` of the queues and one of the
        keyed counts of each :data:`_EXISTS` names, which of those names have jobs queued
        at all (an empty list is no key); then the queue's length of each name of a
        group with queues, the keyed count of each of a group with keyed jobs, and the
        running set of the leased names. (Three commands a name before: 5,000 names over
        4 shards were 60,000 commands.)"""
        k = self.keys
        groups = [names[i : i + _EXISTS] for i in range(0, len(names), _EXISTS)]
        first = await self.conn.execute_many(
            [
                ("SMEMBERS", k.leased),
                *(("EXISTS", *map(k.queue, g)) for g in groups),
                *(("EXISTS", *map(k.fair, g)) for g in groups),
            ]
        )
        leased = first[0]
        if isinstance(leased, Exception):
            raise leased
        held = {reply_text(n) for n in leased}
        holding = [n for n in names if n in held]
        found = first[1 : 1 + len(groups)], first[1 + len(groups) :]
        queued, keyed = (
            [n for g, some in zip(groups, each, strict=True) if count_of(some) for n in g]
            for each in found
        )
        reads: list[tuple[str, ...]] = [("LLEN", k.queue(n)) for n in queued]
        reads += [("HGET", k.fair(n), "n") for n in keyed]
        reads += [("ZCARD", k.running(n)) for n in holding]
        counts = iter([count_of(c) for c in await self.conn.execute_many(reads)])
        lengths, fair, running = (
            {n: next(counts) for n in part} for part in (queued, keyed, holding)
        )
        return {n: (lengths.get(n, 0) + fair.get(n, 0), running.get(n, 0)) for n in names}

    async def stats_of(self, fields: Sequence[str]) -> list[int]:
        """``fields`` of the counters since the namespace began (``Keys.stats``), in one
        ``HMGET``: the totals and the names a page shows, where the whole hash holds five
        fields for every job name."""
        if not fields:
            return []
        # on the bare connection: redis-py encodes 25,000 fields (every name's five) in
        # a quarter of a second
        got = await self.conn.execute_command("HMGET", self.keys.stats, *fields)
        return [reply_int(v) for v in got]

    async def running(
        self, names: Sequence[str], pools: Sequence[LivePool] | None = None
    ) -> list[RunningJob]:
        """Exact at the moment of the read, where pool snapshots are up to a heartbeat
        old (only the checkin ``message`` and ``heard_at`` come from them): the running
        sets, then the records, one round trip each, and the snapshots when not given."""
        k = self.keys
        sets = await self.piped(
            lambda p: [p.zrange(k.running(n), 0, -1, withscores=True) for n in names]
        )
        leases = [
            (reply_text(i), name, float(score) / 1000)
            for name, rows in zip(names, sets, strict=True)
            for i, score in rows
        ]
        if not leases:
            return []
        fields = ("state", "pool", "started_at", "progress")
        rows = await self.piped(lambda p: [p.hmget(k.job(i), *fields) for i, _, _ in leases])
        if pools is None:
            pools = await self.pools()
        said = {(p.id, b.job_id): (b.message, b.heard_at) for p in pools for b in p.busy}
        out = []
        for (job_id, name, deadline), row in zip(leases, rows, strict=True):
            state, pool, progress = (field_text(v) or "" for v in (row[0], row[1], row[3]))
            if state != "running":  # finished between the two reads
                continue
            since = field_seconds(row[2]) or 0.0
            message, heard_at = said.get((pool, job_id), ("", 0.0))
            heard_at = max(heard_at, since)  # none since its start: silent since then
            out.append(RunningJob(job_id, name, pool, since, deadline, progress, message, heard_at))
        return out  # (in no order: Admin.running sorts every shard's)

    async def job_set_sizes(self) -> dict[str, int]:
        names: tuple[JobSet, ...] = ("scheduled", "retry", "dead", "waiting")
        sizes = await self.piped(lambda p: [p.zcard(self.set_key(which)) for which in names])
        return dict(zip(names, sizes, strict=True))

    async def scored(self, which: JobSet, stop: int) -> tuple[int, list[tuple[float, str]]]:
        """The size of a job set and its first ``stop`` entries, with scores (the dead
        set newest first): what a page over every shard merges."""
        z = self.set_key(which)
        total, rows = await self.piped(
            lambda p: (p.zcard(z), p.zrange(z, 0, stop - 1, desc=which == "dead", withscores=True))
        )
        return total, [(float(score), reply_text(i)) for i, score in rows]

    async def in_set(self, which: JobSet, ids: Sequence[str]) -> list[str]:
        if not ids:
            return []
        scores = await self.redis.zmscore(self.set_key(which), list(ids))
        return [i for i, score in zip(ids, scores, strict=True) if score is not None]

    async def pools(self) -> list[LivePool]:
        """Stale: no heartbeat for more than two of its intervals. A pool whose snapshot
        expired (it stopped beating) but which the reaper has not forgotten yet is left
        out, and so is, but in shard 0, a pool over several shards: it writes its
        snapshot there only."""
        entries: list[Any] = list(await self.redis.zrange(self.keys.pools, 0, -1, withscores=True))
        if not entries:
            return []
        raws = await self.redis.mget([self.keys.pool(reply_text(pid)) for pid, _ in entries])
        now = now_ms()
        out = []
        for (_, beat), raw in zip(entries, raws, strict=True):
            try:
                snap = msgspec.json.decode(raw, type=PoolSnapshot) if raw else None
            except msgspec.DecodeError:
                snap = None
            if snap is not None:
                stale = now - reply_int(beat) > snap.heartbeat_interval * 2000  # any score
                out.append(LivePool.read(snap, reply_int(beat), stale))
        return out  # (in no order: Admin.pools sorts every shard's)

    async def stats(self) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.stats)
        return {reply_text(k): reply_int(v) for k, v in raw.items()}

    async def history(
        self, minutes: int = 60, days: int = 30, *, at: float | None = None
    ) -> History:
        if minutes < 0 or days < 0:
            raise ValueError("minutes and days must not be negative")
        now = datetime.fromtimestamp(time.time() if at is None else at, UTC)
        minute = now.replace(second=0, microsecond=0)
        day = minute.replace(hour=0, minute=0)
        starts = [minute - timedelta(minutes=i) for i in range(minutes - 1, -1, -1)]
        starts += [day - timedelta(days=i) for i in range(days - 1, -1, -1)]
        named = [
            t.strftime("%Y%m%d%H%M" if i < minutes else "%Y%m%d") for i, t in enumerate(starts)
        ]
        rows = await self.piped(lambda p: [p.hgetall(self.keys.stats_bucket(n)) for n in named])
        buckets = [Bucket(t.timestamp(), _counts(row)) for t, row in zip(starts, rows, strict=True)]
        return History(buckets[:minutes], buckets[minutes:])

    # -- operating -----------------------------------------------------------------

    async def set_limit(self, name: str, limit: int | None) -> None:
        """(``name`` and ``limit`` checked by :meth:`Admin.set_limit`.)"""
        pipe = self.redis.pipeline(transaction=True)
        if limit is None:
            pipe.hdel(self.keys.limits, name)
        else:
            pipe.hset(self.keys.limits, name, limit)
        # A name at its old limit left the ready set; fetches look at it again (and put
        # it out again if it still has no room, or no jobs).
        pipe.sadd(self.keys.ready, name)
        await pipe.execute()

    async def set_rate(self, name: str, rate: Rate | None) -> None:
        """(``name`` checked by :meth:`Admin.set_rate`.)"""
        pipe = self.redis.pipeline(transaction=True)
        if rate is None:
            pipe.hdel(self.keys.rates, name)
        else:
            pipe.hset(self.keys.rates, name, rate.stored)
        wake = self.keys.wake(name)
        pipe.lpush(wake, "1")
        pipe.ltrim(wake, 0, 9)
        if (await pipe.execute())[-2] == 1:
            # A token into an empty list rings its shard channel, as the scripts' push
            # does (docs/protocol.md, "Wake lists"): a pool in a cluster waits on the
            # channel, not on the list. Outside the transaction, so that a server
            # without SPUBLISH (Redis 6.2) or a user refused it still sets the rate;
            # its pools then find the token at their wait's timeout.
            with contextlib.suppress(ReplyError):
                await self.redis.execute_command("SPUBLISH", wake, "1")  # type: ignore[no-untyped-call]

    async def retry(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        if which == "waiting":
            raise ValueError("waiting jobs run when their parents complete: retry those")
        z = self.set_key(which)
        return await self._in_chunks(
            functools.partial(operator_calls.move, self.scope, which), ids, z
        )

    async def delete(self, which: JobSet, ids: Sequence[str] | None = None) -> int:
        z = self.set_key(which)
        return await self._in_chunks(
            functools.partial(operator_calls.delete, self.scope, which), ids, z
        )

    async def clear_queue(self, name: str) -> int:
        name = validate_name(name)
        total = 0
        while True:
            n = await operator_calls.delete(self.scope, "queue", name=name, limit=_CHUNK)
            total += n
            if n < _CHUNK:
                return total

    async def _in_chunks(
        self, call: Callable[[Sequence[str]], Awaitable[int]], ids: Sequence[str] | None, zset: str
    ) -> int:
        """Apply ``call`` (a script's) to ``ids``, or to a snapshot of the whole set, a
        chunk per call."""
        if ids is None:
            ids = [reply_text(i) for i in await self.redis.zrange(zset, 0, -1)]
        done = 0
        for i in range(0, len(ids), _CHUNK):
            done += await call(ids[i : i + _CHUNK])
        return done

    def set_key(self, which: JobSet) -> str:
        k = self.keys
        sets = {"scheduled": k.scheduled, "retry": k.retry, "dead": k.dead, "waiting": k.waiting}
        if which not in sets:
            raise ValueError(f"unknown job set {which!r}: use scheduled, retry, dead or waiting")
        return sets[which]

    def job_set_key(self, which: SearchedSet) -> str:
        """The key of a job set or of the kept complete jobs (what a search reads)."""
        return self.keys.complete if which == "complete" else self.set_key(which)


def _counts(raw: dict[Any, Any]) -> dict[str, int]:
    """A counters hash as text keys and ints; a field that is not an integer is skipped."""
    return {reply_text(k): n for k, v in raw.items() if (n := opt_int(v)) is not None}


def _rate_text(stored: Any) -> str | None:
    """``"100/s"`` from the stored ``100/1000``; None for none (or garbage, which the
    fetch script reads as no limit)."""
    rate = Rate.from_stored(reply_text(stored)) if stored else None
    return None if rate is None else str(rate)
