"""One typed function per read-only Redis function (``FCALL_RO``, flag ``no-writes``):
the operator's reads of every name's backlog of a shard and of job names' run times over
a window, and the pool's look over the idle shards of a server or cluster node. Each
answers None where the server runs no function for the caller (Redis 6.2, scripts in
``EVALSHA`` mode, a role without the grant), and its caller then reads by plain commands
or shard by shard: a read never turns the scope's script mode to ``EVALSHA``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rota.protocol.calls import Scope
from rota.protocol.job import reply_int
from rota.protocol.scripts import script
from rota.wire.redispy import ReplyError

__all__ = ["backlog", "look", "look_each", "look_kinds", "run_times"]


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
    return None if reply is None else reply_int(reply, 1)  # (no number: it holds some)


async def look_each(scope: Scope, keys: Sequence[Sequence[str]]) -> list[bool] | None:
    """Whether each shard's ``keys`` (the same number of each shard on the node that
    serves ``scope``'s) holds something, in turn (see ``lua/look.lua``), by one
    ``FCALL_RO``: what a fetcher's safety net asks of its ready set, for every fetcher
    on the node at once. None as :func:`look`."""
    flat = [k for each in keys for k in each]
    reply = await _read_only(scope, "look", (-len(keys[0]) if keys else -1, "", "", *flat))
    if reply is None or not isinstance(reply, list):
        return None
    return [bool(reply_int(n, 1)) for n in reply]  # (no number: it holds some)


async def look_kinds(
    scope: Scope, shards: Sequence[Sequence[Sequence[str]]], known: tuple[str, str] = ("", "")
) -> list[int] | None:
    """What each of ``shards`` (on the node that serves ``scope``'s) holds, by kind: for
    each shard its keys of each kind, and per shard in turn the kinds of which some key
    exists, as bits (1 the first kind), by one ``FCALL_RO`` (see ``lua/look.lua``: one
    ``EXISTS`` a shard, a few more only in a shard that holds something). An empty
    list when the set ``known[0]`` lacks the member ``known[1]`` (the node lost its
    data); None as :func:`look`."""
    args: list[str | int] = ["0", *known]
    for kinds in shards:
        args += [len(kinds), *(len(keys) for keys in kinds)]
        args += [k for keys in kinds for k in keys]
    reply = await _read_only(scope, "look", args)
    if reply is None:
        return None
    if not isinstance(reply, list):
        return []
    return [reply_int(n, -1) for n in reply]  # (no number: every kind, as if all held some)


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
