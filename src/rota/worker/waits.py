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

When the BLPOP times out (``wake_timeout``: a safety net for a token that never came),
one ``EXISTS`` over the members' ready sets says whether a fetch could find anything: a
fetch visits the names of its shard's ready set only, so while every one is empty the
members wait on, and an idle pool costs one command a timeout instead of a fetch call
per shard (a fetch with every ready set empty would do nothing: a rate-limited name
that waits for its next start stays in its set). A wait shorter than ``wake_timeout``
(until a rate-limited job is due) ends on its own timer.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from rota.protocol.job import reply_text
from rota.wire.conn import Conn, block_within, hot_path

if TYPE_CHECKING:
    from rota.worker.runtime import PoolRuntime

__all__ = ["SharedWakes", "Wakes"]


class Wakes(Protocol):
    """Where fetchers wait together: :class:`SharedWakes` on one server,
    :class:`rota.worker.nodewaits.NodeWakes` over the nodes of a cluster."""

    async def wait(self, member: int, within: float) -> None: ...

    def nudge(self, member: int) -> None: ...

    @property
    def waiting(self) -> set[int]: ...

    def drop(self, member: int) -> None: ...

    async def run(self) -> None: ...


class SharedWakes:
    """The wake lists of several members (a pool's shards on one server), waited on
    with one BLPOP on a connection of its own."""

    def __init__(
        self, rt: PoolRuntime, keys: Sequence[Sequence[str]], ready: Sequence[str] = ()
    ) -> None:
        self.rt = rt
        #: Each member's ready set (see the module; none: every timeout ends the waits).
        self._ready = dict(enumerate(ready))
        self._owner = {key: member for member, own in enumerate(keys) for key in own}
        self._keys = list(self._owner)
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._woken: set[int] = set()  # a token came while the member was not waiting
        self._someone = asyncio.Event()
        self.conn: Conn = hot_path(rt.redis)

    async def wait(self, member: int, within: float) -> None:
        """Return once a token comes for one of ``member``'s wake lists (or came since
        its last wait), or after ``within`` seconds when that is shorter than
        ``wake_timeout``; else once a timeout of the BLPOP finds a ready set that is not
        empty (see the module)."""
        if member in self._woken:
            self._woken.discard(member)
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[member] = waiter
        self._someone.set()
        # A full wait ends when the BLPOP times out with something ready (run); only a
        # shorter one needs a timer of its own.
        full = within >= self.rt.settings.wake_timeout and self._ready
        try:
            with anyio.move_on_after(math.inf if full else within):
                await waiter
        finally:
            if self._waiting.get(member) is waiter:
                del self._waiting[member]

    @property
    def waiting(self) -> set[int]:
        """The members waiting now (a wait ended but not yet returned is not one)."""
        return {member for member, waiter in self._waiting.items() if not waiter.done()}

    def nudge(self, member: int) -> None:
        """End ``member``'s wait now, as a token for it would."""
        waiter = self._waiting.get(member)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def drop(self, member: int) -> None:
        """Wait no more on ``member``'s wake lists (the pool retired its shard), from
        the next BLPOP on."""
        self._keys = [key for key in self._keys if self._owner[key] != member]
        self._ready.pop(member, None)
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
                if reply is None:  # timed out: every member waiting fetches once, if any may
                    if await self._anything_ready():
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

    async def _anything_ready(self) -> bool:
        """Whether a fetch after this timeout could find a job (see the module)."""
        if not self._ready:
            return True
        ready = functools.partial(self.conn.execute_command, "EXISTS", *self._ready.values())
        return bool(await self.rt.watch.keep_trying("fetcher", ready, tell=False))

    async def _blpop(self) -> Any:
        seconds = block_within(self.conn, self.rt.settings.wake_timeout)  # redis-py's time out
        return await self.conn.execute_command("BLPOP", *self._keys, seconds)
