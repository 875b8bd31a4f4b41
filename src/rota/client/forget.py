"""Forgetting the job names nobody uses any more, over one shard or all of a pool's.

Every pool's reaper calls this now and then (rota.worker.heartbeat); one caller a turn
does the work, which the turn key (``Keys.forget_turn``) of the first shard named
decides. A pool over several shards makes one pass over all of them, with one turn and
one read of the live pools' snapshots (shard 0, where pools over several shards write
them), not one of each a shard: an idle pool's commands must not grow with its shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rota.protocol import operator_calls
from rota.protocol.calls import Scope
from rota.protocol.job import now_ms
from rota.protocol.keys import Keys
from rota.wire.redispy import Redis

__all__ = ["NamedShard", "forget_idle_names"]


class NamedShard(Protocol):
    """What a pass reads of a shard (a :class:`rota.client.shard_ops.ShardOperations`,
    which calls this module: a protocol, so that neither imports the other back)."""

    redis: Redis
    keys: Keys
    scope: Scope

    async def names(self) -> list[str]: ...

    async def pools(self) -> Sequence[Any]: ...


async def forget_idle_names(
    shards: Sequence[NamedShard],
    after: float,
    chunk: int = 500,
    *,
    turn: float | None = None,
    snapshots: NamedShard | None = None,
) -> list[str]:
    """Forget, in each of ``shards``, the job names that have had no job, pause, limit
    or live pool for ``after`` seconds (see ``lua/forget_names.lua``); the names
    forgotten. A name is first noted as idle, and forgotten by a later call once
    ``after`` passed. ``turn``: do it only when no other caller did within that many
    seconds (taken in the first of ``shards``). ``snapshots``: the shard whose pool
    snapshots say which names live pools serve (the first of ``shards`` when not
    given), read once for all of them."""
    first = shards[0]
    if turn is not None:
        px = max(1, int(turn * 1000))
        if not await first.redis.set(first.keys.forget_turn, "1", nx=True, px=px):
            return []
    served = {name for pool in await (snapshots or first).pools() for name in pool.jobs}
    forgotten: list[str] = []
    for shard in shards:
        names = [n for n in await shard.names() if n not in served]
        now = now_ms()
        for i in range(0, len(names), chunk):
            forgotten += await operator_calls.forget_names(
                shard.scope, now, now - int(after * 1000), names[i : i + chunk]
            )
    return forgotten
