"""One typed function per script rota calls: the one place that packs a script's
arguments and reads its reply (the headers in ``lua/`` say the same from the other side).

Every function takes a :class:`Scope`, the connection, namespace prefix and
:class:`~rota.protocol.scripts.ScriptMode` of its caller, so that callers name what
they want done, never an argument's position. The hot paths (:func:`enqueue`,
:func:`fetch`, :func:`finish`) call their script without a hop in between: a function
call here costs each job about what one of its Redis commands costs. The operator's
scripts (a name paused, a set moved or cleaned, one job's actions) have theirs in
:mod:`rota.protocol.operator_calls`, the read-only functions (the operator's reads, the
pool's look over idle shards) in :mod:`rota.protocol.read_calls`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from rota.protocol.job import now_ms, reply_int, reply_text
from rota.protocol.rows import (
    Aborted,
    Complete,
    Dead,
    Drop,
    EnqueueRow,
    Fetched,
    Outcome,
    Requeue,
    Retry,
)
from rota.protocol.scripts import Arg, Batching, Script, ScriptMode, call_many, script
from rota.wire.conn import block_within
from rota.wire.redispy import ReplyError

__all__ = [
    "BATCH",
    "FetchReply",
    "HeartbeatReply",
    "Lessee",
    "PromoteReply",
    "ReapReply",
    "Scope",
    "abort",
    "batch_entry",
    "encode_outcomes",
    "enqueue",
    "enqueue_args",
    "enqueue_batch",
    "fetch",
    "finish",
    "heartbeat",
    "promote",
    "reap",
    "register",
    "trim_dead",
    "wait",
]

#: Jobs per ``enqueue_batch`` call. A script call blocks every other client of the
#: shard, and a job costs Redis 15-20 µs inside the script: 50 keep a call near 1 ms,
#: and the calls travel in one pipeline, so the throughput is that of bigger calls.
BATCH = 50


class Scope:
    """Where and how a script runs: the connection, the namespace's key prefix, and how
    this server takes scripts (one :class:`ScriptMode` per server, shared by every scope
    of a client)."""

    __slots__ = ("conn", "mode", "prefix")

    def __init__(self, conn: Batching, prefix: str, mode: ScriptMode) -> None:
        self.conn = conn
        self.prefix = prefix
        self.mode = mode

    def on(self, conn: Batching) -> Scope:
        """The same namespace and mode, over another connection."""
        return Scope(conn, self.prefix, self.mode)

    async def call(self, name: str, args: Sequence[Arg]) -> Any:
        return await script(name)(self.conn, self.prefix, args, self.mode)


# -- enqueue ---------------------------------------------------------------------------


def enqueue_args(row: EnqueueRow) -> list[Arg]:
    """The ``enqueue`` script's arguments (it takes no group: those go by batch), less
    the tail that says "none": each argument costs Redis about a tenth of what the whole
    call's script does, and a plain job needs only its first four."""
    if row.debounce_key:
        tail = [row.traceparent, row.tracestate, row.expires or "", row.fair]
        return [*row[:10], *tail, *_debounce(row)]
    if row.fair:
        return [*row[:10], row.traceparent, row.tracestate, row.expires or "", row.fair]
    if row.expires:
        return [*row[:10], row.traceparent, row.tracestate, row.expires]
    if row.traceparent:
        return [*row[:10], row.traceparent, row.tracestate]
    if row.after:
        return list(row[:10])
    if row.max_fails != "" or row.timeout != "":
        return list(row[:9])
    if row.unique:
        return list(row[:7])
    return list(row[:5] if row.run_at else row[:4])


def batch_entry(row: EnqueueRow) -> list[str]:
    """The entry of ``enqueue_batch``: strings, its optional tail (items 9 to 20) only as
    far as it is used."""
    entry = [row.id, row.name, row.args.decode(), str(row.run_at), row.unique]
    entry += (str(row.unique_ttl), str(row.max_fails), str(row.timeout))
    if row.debounce_key:
        used = 20
    elif row.fair:
        used = 16
    elif row.expires:
        used = 15
    elif row.group:
        used = 14
    elif row.traceparent:
        used = 13
    elif row.after or row.waits_group:
        used = 11
    else:
        return entry
    tail = [*row[9:12], row.traceparent, row.tracestate, str(row.group_size)]
    tail += (str(row.expires) if row.expires else "", row.fair)
    if row.debounce_key:
        tail += [str(a) for a in _debounce(row)]
    return entry + tail[: used - 8]


def _debounce(row: EnqueueRow) -> tuple[str, int, str, str]:
    """The debounce arguments of the enqueue scripts (see ``lua/_debounce.lua``)."""
    return row.debounce_key, row.debounce_ms, row.debounce_mode, "1" if row.debounce_move else "0"


async def enqueue(scope: Scope, row: EnqueueRow, generation: int | None = None) -> tuple[str, bool]:
    """Enqueue one job: its id (another's when its id or unique key is held) and whether
    it was made. An error reply (``NOPARENT``, a refusal, ``RESHARDED`` when
    ``generation`` is not the shard record's: see :mod:`rota.protocol.reshard`) raises."""
    args = enqueue_args(row)
    if generation is not None:  # checked: it follows the time, '<now>@<generation>'
        args[3] = f"{row.now}@{generation}"
    answer = await script("enqueue")(scope.conn, scope.prefix, args, scope.mode)
    return reply_text(answer[0]), bool(answer[1])


async def enqueue_batch(
    scope: Scope, rows: Sequence[EnqueueRow], generation: int | None = None
) -> tuple[list[tuple[str, bool]], Exception | None]:
    """Enqueue ``rows`` by calls of :data:`BATCH` jobs, all in one pipeline, in order:
    (id, created) of every job of the calls that got through, and the first error reply
    (every call is atomic: all of its jobs or none; ``generation`` as in
    :func:`enqueue`)."""
    now = now_ms()
    batch = script("enqueue_batch")
    at: Arg = now if generation is None else f"{now}@{generation}"  # as enqueue's
    calls: list[tuple[Script, Sequence[Arg]]] = [
        (batch, [at, msgspec.msgpack.encode([batch_entry(r) for r in rows[i : i + BATCH]])])
        for i in range(0, len(rows), BATCH)
    ]
    answers = await call_many(scope.conn, scope.prefix, calls, scope.mode, raise_on_error=False)
    jobs: list[tuple[str, bool]] = []
    failed: Exception | None = None
    for answer in answers:
        if isinstance(answer, Exception):
            failed = failed or answer
            continue
        jobs += [(reply_text(answer[i]), bool(answer[i + 1])) for i in range(0, len(answer), 2)]
    return jobs, failed


# -- fetch -----------------------------------------------------------------------------


class FetchReply(NamedTuple):
    """What a fetch leased: the jobs, the ids it made dead as bad payloads, when a
    rate-limited name may start its next job (ms; 0: none), and the names of the ready
    set (None unless asked for)."""

    jobs: list[Fetched]
    buried: list[str]
    due: int
    ready: list[str] | None


class Lessee(NamedTuple):
    """Who fetches, as every fetch of a pool says it: the lease it takes (ms), its id,
    and the largest args it runs (bytes; a larger job is made dead as a bad payload)."""

    lease_ms: int
    pool_id: str
    max_args_bytes: int
    #: Per name whose handler sets either: name, its default expiry (ms after the
    #: enqueue; "" for none), "1" when it keeps no dead jobs (see ``lua/fetch.lua``).
    rules: tuple[Arg, ...] = ()


async def fetch(
    scope: Scope,
    lessee: Lessee,
    names: Sequence[str],
    fill: Sequence[str],
    *,
    wait: tuple[Sequence[str], float] | None = None,
) -> FetchReply:
    """Lease jobs of ``names`` in that order, then of ``fill``: ``len(names)`` jobs at
    most (see ``lua/fetch.lua``).

    ``wait`` (wake lists, seconds): ``BLPOP`` on them first, in the same write: Redis
    runs the fetch the moment the BLPOP returns, which saves the round trip between them
    on the way from an enqueue to a start; the fetch then reads the server's clock. A
    fetch that found its script missing there is sent again on its own."""
    lease_ms, pool_id, max_args_bytes, rules = lessee
    # The 1 asks for the ready set's names in the reply.
    args: list[Arg] = [0 if wait else now_ms(), lease_ms, pool_id, max_args_bytes]
    args += (len(names), *names, len(fill), *fill, 1, *rules)
    fetching = script("fetch")
    if wait is None:
        reply = await fetching(scope.conn, scope.prefix, args, scope.mode)
    else:
        command = scope.mode.command(fetching, scope.prefix, args)
        seconds = block_within(scope.conn, wait[1])  # redis-py's reads time out
        _, reply = await scope.conn.execute_many([("BLPOP", *wait[0], seconds), command])
        if isinstance(reply, ReplyError):  # e.g. the library is gone: loaded again there
            reply = await fetching(scope.conn, scope.prefix, args, scope.mode)
        elif isinstance(reply, Exception):
            raise reply
    buried = reply[1]
    fields = (
        Fetched.parse(reply[0]),
        [b.decode("utf-8", "replace") for b in buried] if buried else [],
        reply_int(reply[2]) if len(reply) > 2 else 0,
        [b.decode() for b in reply[3]] if len(reply) > 3 else None,
    )
    return tuple.__new__(FetchReply, fields)  # as NamedTuple._make does: no Python call


# -- finish ----------------------------------------------------------------------------


_COMPLETE: Final = ("complete",)


def _wire(o: Outcome) -> tuple[Arg, ...]:
    """An outcome other than complete as the finish script's seven fields."""
    if isinstance(o, Retry):
        return (o.id, o.name, o.token, "retry", str(o.due), o.error, o.reason.value)
    if isinstance(o, (Dead, Drop)):
        return (o.id, o.name, o.token, o.kind, "", o.error, o.reason.value)
    if isinstance(o, Aborted):
        return (o.id, o.name, o.token, "aborted", str(o.keep_ms), o.message, "")
    if isinstance(o, Requeue):
        return (o.id, o.name, o.token, "requeue", "", "", "")
    return (o.id, o.name, o.token, "complete", o.result, o.keep_ms, o.keep_none_ms)


def encode_outcomes(outcomes: Iterable[Outcome], logs: list[Arg] | None = None) -> bytes:
    """The one place an outcome is written as the finish script reads it: seven fields
    per outcome (id, name, token, kind, a, b, c: see ``lua/finish.lua``), all in one
    flat MessagePack array. A complete outcome holds its fields in that order already
    and is copied without a call. The lines of the outcomes that carry one for their
    job's log (a traceback) are added to ``logs``, id and line, when it is given."""
    flat: list[Arg] = []
    for o in outcomes:
        if o.__class__ is Complete:  # concatenations only: no call per job
            flat += o[:3]
            flat += _COMPLETE
            flat += o[3:]
        else:
            flat += _wire(o)
            if o.log and logs is not None:
                logs += (o.id, o.log)
    return msgspec.msgpack.encode(flat)


async def finish(
    scope: Scope, outcomes: Iterable[Outcome], *, complete_max: int, kept: bool = False
) -> list[str]:
    """Record the outcomes of many attempts in one call; the ids of the stale ones
    (their lease was lost). ``kept``: they keep results, which grow Redis's memory, so
    they go through ``finish_kept``, which Redis refuses while it is over
    ``maxmemory`` (see :mod:`rota.protocol.render`).

    The outcomes go as one MessagePack argument (:func:`encode_outcomes`): Redis clients
    encode each argument on its own, and seven per job cost more than the job itself.
    The lines they carry for their jobs' logs (a failed attempt's traceback) go in one
    more, only when there are some: written with the outcome, not in a call per job."""
    logs: list[Arg] = []
    args: list[Arg] = [now_ms(), encode_outcomes(outcomes, logs), complete_max]
    if logs:
        args.append(msgspec.msgpack.encode(logs))
    name = "finish_kept" if kept else "finish"
    stale = await script(name)(scope.conn, scope.prefix, args, scope.mode)
    return [s.decode() for s in stale] if stale else []


# -- the pool's upkeep -----------------------------------------------------------------


class HeartbeatReply(NamedTuple):
    lost: list[str]  # ids whose lease this pool no longer holds
    aborts: list[str]  # ids whose abort was requested
    fresh: bool  # the pool was not in the pools set (its first beat, or Redis forgot it)


async def heartbeat(
    scope: Scope,
    pool_id: str,
    snapshot: bytes,
    ttl_ms: int,
    lease_deadline: int,
    held: Iterable[tuple[str, str, str]],
) -> HeartbeatReply:
    """Score the pool, store its ``snapshot`` for ``ttl_ms`` (empty: none, as in the
    shards but the first), and extend to ``lease_deadline`` the leases it ``held``
    (name, id, token) and still holds."""
    args: list[Arg] = [now_ms(), pool_id, snapshot, ttl_ms, lease_deadline]
    for triple in held:
        args += triple
    lost, aborts, fresh = await scope.call("heartbeat", args)
    return HeartbeatReply([i.decode() for i in lost], [i.decode() for i in aborts], bool(fresh))


class ReapReply(NamedTuple):
    reclaimed: list[str]  # ids whose lease expired: back in their queues
    buried: list[str]  # ids whose leases expired too often: dead
    forgotten: list[str]  # pools that stopped beating


async def reap(scope: Scope, max_lost: int, pool_expiry_ms: int, limit: int) -> ReapReply:
    """Reclaim expired leases and forget dead pools (see ``lua/reap.lua``)."""
    reply = await scope.call("reap", [now_ms(), max_lost, pool_expiry_ms, limit])
    return ReapReply(*([i.decode() for i in ids] for ids in reply))


class PromoteReply(NamedTuple):
    moved: int  # jobs moved to their queues
    next_due: int  # the next due time (ms; -1: none)
    buried: list[str]  # ids made dead: their due time was past the year 9999


async def promote(scope: Scope, now: int, limit: int, dropping: Sequence[str] = ()) -> PromoteReply:
    """Move due scheduled and retrying jobs to their queues, ``limit`` per set, make
    dead those due past :data:`~rota.protocol.job.MAX_MS`, and end those that expired
    (deleted for the names of ``dropping``, whose handlers keep no dead jobs; see
    ``lua/promote.lua``)."""
    moved, next_due, *buried = await scope.call("promote", [now, limit, *dropping])
    ids = [reply_text(i) for i in buried[0]] if buried else []
    return PromoteReply(reply_int(moved), reply_int(next_due, -1), ids)


async def trim_dead(scope: Scope, now: int, max_age_ms: int, max_count: int, limit: int) -> int:
    """Forget dead jobs older than ``max_age_ms`` and the oldest beyond ``max_count``."""
    return reply_int(await scope.call("trim_dead", [now, max_age_ms, max_count, limit]))


async def register(
    scope: Scope, names: Iterable[tuple[str, int, int | str, str]], *, keep: bool = False
) -> int:
    """Make job names known: (name, priority, max concurrency or ``""``, stored rate or
    ``""``). ``keep`` writes only the names Redis did not know; how many were written."""
    args: list[Arg] = [value for entry in names for value in entry]
    if keep:
        args.append("keep")
    return int(await scope.call("register", args))


# -- a job waited for, or aborted -------------------------------------------------------


async def wait(scope: Scope, job_id: str) -> list[Any]:
    """Register a waiter on a job and read its state: (state, result, error, reason),
    raw; empty when there is no such job."""
    answer: list[Any] = await scope.call("wait", [job_id])
    return answer


async def abort(scope: Scope, job_id: str, keep_ms: int) -> str:
    """Abort a job: the state it was in (``missing`` for none)."""
    return reply_text(await scope.call("abort", [job_id, now_ms(), keep_ms]))
