"""One typed function per script an operator's action calls (see :mod:`rota.protocol.calls`
for the producer's and the pool's): a name paused or resumed, a fair key's setting, the
jobs of a set moved, edited, deleted or cleaned by age, one job moved to the front of its
queue, deleted from it or killed, idle names forgotten (the reads by a read-only
function are in :mod:`rota.protocol.read_calls`). Each takes the :class:`Scope` of the
shard it acts on, packs the script's arguments and reads its reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from rota.protocol.calls import Scope
from rota.protocol.job import now_ms, reply_text

__all__ = [
    "clean",
    "delete",
    "edit",
    "fair_key",
    "forget_names",
    "kill",
    "move",
    "pause",
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
