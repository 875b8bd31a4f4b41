"""One typed function per script an operator's action calls (see :mod:`rota.protocol.calls`
for the producer's and the pool's): a name paused or resumed, a fair key's setting, the
jobs of a set moved, edited, deleted or cleaned by age, one job moved to the front of its
queue, deleted from it or killed, idle names forgotten; and the reads by a function,
every name's backlog of a shard and job names' run times over a window. Each takes the
:class:`Scope` of the shard it acts on, packs the script's arguments and reads its reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rota.protocol.calls import Scope
from rota.protocol.job import now_ms, reply_int, reply_text
from rota.protocol.scripts import script
from rota.wire.redispy import ReplyError

__all__ = [
    "backlog",
    "clean",
    "delete",
    "edit",
    "fair_key",
    "forget_names",
    "kill",
    "look",
    "move",
    "pause",
    "run_times",
    "to_front",
    "unqueue",
]


async def pause(scope: Scope, name: str, *, resume: bool = False) -> bool:
    """Pause (or resume) a job name: whether that changed anything."""
    return bool(await scope.call("pause", ["resume" if resume else "pause", name]))


async def fair_key(scope: Scope, op: str, name: str, key: str, value: str = "") -> bool:
    """Change a fair key's setting (see ``lua/fair_keys.lua``): ``op`` weight, limit
    (``key`` '' for the name's default), rate, pause or resume; ``value`` '' clears it.
    Whether it changed anything. ``recount``: the key's running set (every key's: ``key``
    '') made again from the name's, for a limit written otherwise."""
    return bool(await scope.call("fair_keys", [op, name, key, value]))


async def move(scope: Scope, which: str, ids: Sequence[str]) -> int:
    """Move jobs of the set ``which`` to their queues now: how many moved."""
    return int(await scope.call("move", [which, now_ms(), *ids]))


async def edit(scope: Scope, which: str, job_id: str, args: bytes) -> int:
    """Replace the args of a job of the retry or dead set and move it to its queue, in
    one step (``edit.lua``): 1 moved; -1 not in the set, -2 no record or name, -3 dead
    of ``dependency_failed`` (nothing written for any of these)."""
    return int(await scope.call("edit", [which, now_ms(), job_id, args]))


async def delete(
    scope: Scope, where: str, ids: Sequence[str] = (), *, name: str = "", limit: int = 0
) -> int:
    """Delete jobs of a set, or (``where="queue"``) of the queue ``name``: ``ids``, or
    its ``limit`` oldest entries. How many were deleted."""
    return int(await scope.call("delete", [where, name, limit, *ids]))


async def forget_names(scope: Scope, now: int, cutoff: int, names: Sequence[str]) -> list[str]:
    """Forget those of ``names`` idle since ``cutoff`` (ms), note the others idle: the
    names forgotten."""
    return [reply_text(n) for n in await scope.call("forget_names", [now, cutoff, *names])]


async def to_front(scope: Scope, job_id: str) -> bool:
    """Move a queued job to the front of its queue, its name (or key) given the next
    turn, and wake a pool: False when it is in no queue (see ``lua/operate.lua``)."""
    return bool(await scope.call("operate", ["front", job_id]))


async def unqueue(scope: Scope, job_id: str) -> bool:
    """Delete a queued job: False when it is in no queue (see ``lua/operate.lua``)."""
    return bool(await scope.call("operate", ["unqueue", job_id]))


async def kill(scope: Scope, reason: str, error: str, ids: Sequence[str]) -> int:
    """Move jobs of the retry set to the dead set now, with ``reason`` and ``error``:
    how many were still there."""
    return int(await scope.call("operate", ["kill", reason, error, *ids]))


async def clean(
    scope: Scope, which: str, age_ms: int, name: str, start: int, limit: int
) -> tuple[int, int]:
    """Delete the jobs of ``which`` older than ``age_ms`` (of ``name``; '' any) among
    ``limit`` entries from ``start``: how many were deleted, and how many read."""
    deleted, read = await scope.call("operate", ["clean", which, age_ms, name, start, limit])
    return int(deleted), int(read)


async def backlog(scope: Scope, names: Sequence[str] | None) -> list[int] | None:
    """Jobs queued and running (see ``lua/backlog.lua``), by ``FCALL_RO``: over the names
    the shard knows, summed (``names`` None: ``[queued, running]``), else of each of
    ``names``, flat (queued, running, queued...). None when this server runs no
    function for this caller (see :func:`_read_only`): the caller reads the figures by
    plain commands then."""
    reply = await _read_only(scope, "backlog", ("sum",) if names is None else ("each", *names))
    if reply is None:
        return None
    return [n if n.__class__ is int else reply_int(n) for n in reply]


async def run_times(
    scope: Scope, slots: Sequence[str], names: Sequence[str]
) -> list[dict[int, int]] | None:
    """The run-time buckets of each of ``names`` over ``slots``, added up in the shard
    (see ``lua/run_times.lua``), by ``FCALL_RO``: per name, bucket -> attempts, the
    buckets that counted any. None when this server runs no function for this caller
    (see :func:`_read_only`): the caller reads the slots by plain commands then."""
    reply = await _read_only(scope, "run_times", (len(slots), *slots, *names))
    if reply is None:
        return None
    each = []
    for row in reply:
        ints = [reply_int(n) for n in row]
        each.append({ints[i]: ints[i + 1] * _SPLIT + ints[i + 2] for i in range(0, len(ints), 3)})
    return each


async def look(
    scope: Scope, keys: Sequence[Sequence[str]], known: tuple[str, str] = ("", "")
) -> int | None:
    """Whether any of ``keys`` (the same number of each shard on the node that serves
    ``scope``'s, in a cluster) exists (see ``lua/look.lua``), by ``FCALL_RO``: 1 or 0;
    2 when the set ``known[0]`` lacks the member ``known[1]``. None when this server
    runs no function for this caller, or refused the call (a key of a slot it does not
    serve): the caller looks shard by shard then."""
    flat = [k for each in keys for k in each]
    reply = await _read_only(scope, "look", (len(keys[0]) if keys else 1, *known, *flat))
    return None if reply is None else int(reply)


#: ``lua/run_times.lua`` answers a count as two numbers, ``hi * _SPLIT + lo``.
_SPLIT = 2**26


async def _read_only(scope: Scope, name: str, args: Sequence[str | int]) -> Any:
    """The reply of the read-only function of the script ``name``, by ``FCALL_RO``; None
    when this server runs no function for this caller (no functions, the library not
    loaded and not loadable, or ``FCALL_RO`` of it refused to an older role's rules).
    No other refusal is mended here, so that a read never turns the scope's script mode
    to ``EVALSHA``."""
    if not scope.mode.functions:
        return None
    read = script(name)
    for attempt in range(2):
        try:
            return await scope.conn.execute_command(
                "FCALL_RO", read.function, 1, scope.prefix, *args
            )
        except ReplyError as error:
            if attempt or scope.mode.remedy(error) != "library":
                return None
            await scope.mode.mend(scope.conn, "library", read)  # as any call does
            if not scope.mode.functions:
                return None
    return None
