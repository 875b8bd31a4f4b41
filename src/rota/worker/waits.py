"""One wait on the wake lists for the shards of a pool that share a server.

A pool over K shards runs a fetcher and a scheduler per shard. In a cluster each waits
on its own node with a BLPOP of its own: a BLPOP cannot span slots. On one server, K
such waits would hold K connections and time out K times per interval where one wait
does: the fetchers of the shards that share a server wait here instead, on one BLPOP
over all their wake lists, and the one whose list got the token fetches
(:class:`SharedWakes`); their schedulers share a listener alike
(:func:`rota.worker.scheduler.listen_for_schedulers`). A wake-up then costs one round
trip more than a fetcher's own BLPOP, whose fetch is sent behind it in the same write.

A token that comes for a fetcher that is not waiting (it is fetching) is kept for it:
its next wait returns at once, as its own BLPOP would have found the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from rota.protocol.job import reply_text
from rota.wire.conn import Conn, hot_path

if TYPE_CHECKING:
    from rota.worker.runtime import PoolRuntime

__all__ = ["SharedWakes"]


class SharedWakes:
    """The wake lists of several members (a pool's shards on one server), waited on
    with one BLPOP on a connection of its own."""

    def __init__(self, rt: PoolRuntime, keys: Sequence[Sequence[str]]) -> None:
        self.rt = rt
        self._owner = {key: member for member, own in enumerate(keys) for key in own}
        self._keys = list(self._owner)
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._woken: set[int] = set()  # a token came while the member was not waiting
        self._someone = asyncio.Event()
        self.conn: Conn = hot_path(rt.redis)

    async def wait(self, member: int, within: float) -> None:
        """Return once a token comes for one of ``member``'s wake lists (or came since
        its last wait), or after ``within`` seconds."""
        if member in self._woken:
            self._woken.discard(member)
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[member] = waiter
        self._someone.set()
        try:
            with anyio.move_on_after(within):
                await waiter
        finally:
            if self._waiting.get(member) is waiter:
                del self._waiting[member]

    def nudge(self, member: int) -> None:
        """End ``member``'s wait now, as a token for it would."""
        waiter = self._waiting.get(member)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def drop(self, member: int) -> None:
        """Wait no more on ``member``'s wake lists (the pool retired its shard), from
        the next BLPOP on."""
        self._keys = [key for key in self._keys if self._owner[key] != member]
        self._woken.discard(member)
        self.nudge(member)

    async def run(self) -> None:
        """BLPOP while a member waits; hand each token to its member."""
        try:
            while True:
                if not self._waiting:
                    self._someone.clear()
                    await self._someone.wait()
                reply = await self.rt.watch.keep_trying("fetcher", self._blpop, tell=False)
                if reply is None:  # timed out: every member waiting fetches once
                    for waiter in self._waiting.values():
                        if not waiter.done():
                            waiter.set_result(None)
                    continue
                member = self._owner.get(reply_text(reply[0]))
                if member is None:
                    continue
                woken = self._waiting.get(member)
                if woken is not None and not woken.done():
                    del self._waiting[member]
                    woken.set_result(None)
                else:
                    self._woken.add(member)
        finally:
            with anyio.CancelScope(shield=True):
                await self.conn.aclose()

    async def _blpop(self) -> Any:
        return await self.conn.execute_command("BLPOP", *self._keys, self.rt.settings.wake_timeout)
