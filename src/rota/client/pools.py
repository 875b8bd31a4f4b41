"""The operator's commands to live pools: quiet, stop and resume one pool, or every pool
of a host, carried through Redis.

A command is a field of one hash in shard 0 (``Keys.pool_commands``: pool id ->
``quiet`` or ``stop``; no field: run), which each pool reads at each heartbeat and
acknowledges in its snapshot's ``state`` (see :data:`rota.protocol.snapshot.POOL_STATES`
and docs/protocol.md). A hash rather than a message: a pool that misses a message (busy,
or away from Redis) learns it at its next beat, and the command stays as long as the pool
lives (a quiet pool stays quiet). A message on ``Keys.pool_commands_told`` after each
write makes the pool read it at once. A stop is final: it cannot be taken back nor
turned into a quiet. Each write also drops the fields of pools no longer live, so that
the hash holds no more than the live pools' commands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, Literal

from rota.client.status import LivePool
from rota.protocol.job import reply_text
from rota.wire.redispy import wrong_type

if TYPE_CHECKING:
    from rota.client.routing import Shards

__all__ = ["COMMANDS", "Command", "PoolCommands", "PoolNotFound", "StopIsFinal"]

Command = Literal["quiet", "stop", "resume"]
#: The commands an operator gives, and the field each leaves (None: the field removed).
COMMANDS: Final[dict[str, str | None]] = {"quiet": "quiet", "stop": "stop", "resume": None}


class PoolNotFound(LookupError):
    """No live pool has that id, or runs on that host."""


class StopIsFinal(ValueError):
    """The pool was told to stop: it drains and leaves, and nothing takes that back."""


class PoolCommands:
    """The commands of one namespace's pools (``client.admin.commands``, see the
    module): written in its first shard, given to the pools ``live`` lists."""

    def __init__(self, route: Shards, live: Callable[[], Awaitable[Sequence[LivePool]]]) -> None:
        self._route = route
        self._live = live

    async def read(self) -> dict[str, str]:
        """What each pool was told and has not left since: pool id -> quiet or stop."""
        s = self._route.all[0]
        try:
            raw = await s.redis.hgetall(s.keys.pool_commands)
        except Exception as exc:  # a key of another type, written by hand: none
            if not wrong_type(exc):
                raise
            return {}
        return {reply_text(k): reply_text(v) for k, v in raw.items()}

    async def quiet_pool(self, pool_id: str) -> None:
        """Tell a live pool to fetch no more jobs and finish those it holds; it stays
        alive, beats, and says ``quiet`` (:class:`PoolNotFound` for no such live pool;
        :class:`StopIsFinal` once told to stop)."""
        await self.give("quiet", pool_id=pool_id)

    async def stop_pool(self, pool_id: str) -> None:
        """Tell a live pool to stop as on SIGTERM: it drains within its ``grace`` (the
        jobs it cannot finish go back to their queues) and leaves; it says ``stopping``
        until its heartbeat ends."""
        await self.give("stop", pool_id=pool_id)

    async def resume_pool(self, pool_id: str) -> None:
        """Let a quiet pool fetch again (nothing for a pool that runs)."""
        await self.give("resume", pool_id=pool_id)

    async def quiet_host(self, host: str) -> list[str]:
        """:meth:`quiet_pool` for every live pool of ``host`` (its snapshot's hostname):
        the ids told (a pool told to stop is left out)."""
        return await self.give("quiet", host=host)

    async def stop_host(self, host: str) -> list[str]:
        """:meth:`stop_pool` for every live pool of ``host``: the ids told."""
        return await self.give("stop", host=host)

    async def resume_host(self, host: str) -> list[str]:
        """:meth:`resume_pool` for every live pool of ``host``: the ids told."""
        return await self.give("resume", host=host)

    async def give(
        self,
        command: Command,
        *,
        pool_id: str | None = None,
        host: str | None = None,
    ) -> list[str]:
        """Tell pool ``pool_id``, or every pool of ``host``, of the live ones,
        ``command`` (quiet, stop, resume): the ids told. A pool told to stop refuses a
        quiet or a resume (:class:`StopIsFinal`, nothing written); of a host's pools,
        those are left out."""
        if command not in COMMANDS:
            raise ValueError(f"command: must be one of {', '.join(COMMANDS)}, got {command!r}")
        if (pool_id is None) == (host is None):
            raise ValueError("give a pool id or a host, not both")
        live = await self._live()
        chosen = [p.id for p in live if p.id == pool_id or p.host == host]
        if not chosen:
            raise PoolNotFound(
                f"no live pool {pool_id}" if host is None else f"no live pool on host {host}"
            )
        told = await self.read()
        if command != "stop":
            final = [p for p in chosen if told.get(p) == "stop"]
            if host is not None:
                chosen = [p for p in chosen if p not in final]
            elif final:
                raise StopIsFinal(
                    f"pool {final[0]} was told to stop: a stop cannot be taken back"
                    + (f" (and {len(final) - 1} more)" if len(final) > 1 else "")
                )
        s = self._route.all[0]
        key, field = s.keys.pool_commands, COMMANDS[command]
        gone = [p for p in told if p not in {pool.id for pool in live}]
        async with s.redis.pipeline(transaction=False) as pipe:
            if chosen and field is None:
                pipe.hdel(key, *chosen)
            elif chosen and field is not None:
                pipe.hset(key, mapping=dict.fromkeys(chosen, field))
            if gone:
                pipe.hdel(key, *gone)
            for pool in chosen:  # each reads it now, not at its next heartbeat
                pipe.publish(s.keys.pool_commands_told, pool)
            await pipe.execute()
        return chosen
