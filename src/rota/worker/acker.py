"""Batched finishes: outcomes of many attempts go to Redis in one script call.

Workers hand their outcome over and move on; the acker flushes whatever gathered in
the same turn of the event loop, so a busy pool pays one round trip for many jobs.
When Redis is away, or refuses the finish, the outcomes are kept and sent again: a
finish is never dropped, and the heartbeat keeps extending their jobs' leases meanwhile
(see :meth:`Acker.unsent`), so no job runs twice for it.

A finish that keeps a result grows Redis's memory, so it goes through ``finish_kept``,
which Redis refuses while it is over ``maxmemory``; every other outcome goes through
``finish``, which it runs even then (see :mod:`rota.protocol.render`). When Redis is out
of memory, pools therefore keep finishing what frees memory, hold the rest, and fetch no
more than they can hold (:meth:`Acker.wait_room`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import structlog

from rota.protocol import calls
from rota.protocol.rows import Outcome
from rota.redis.outage import Condition, condition, error_reply
from rota.worker.runtime import PoolRuntime

__all__ = ["Acker"]

log = structlog.get_logger("rota.pool")

# Outcomes per finish call. A call blocks every other client of the shard (about 26 µs
# per outcome on a slow host, so 100 take 2.6 ms), and each call costs the pool a round
# trip and its bookkeeping: calls of 32 cost a pool at full speed a quarter of its
# throughput (docs/performance.md, "Where the run path's time went").
_MAX_BATCH = 100
# How often held results (refused for memory) are offered again while the pool works on.
_KEPT_RETRY = 0.5


class Acker:
    def __init__(self, rt: PoolRuntime) -> None:
        self.rt = rt
        self._pending: list[Outcome] = []
        # asyncio's own event, set per outcome and cleared per turn: an anyio.Event is a
        # wrapper to call and a new object (a backend lookup) every turn.
        self._event = asyncio.Event()
        self._room = anyio.Event()
        self._lock = anyio.Lock()
        self.stale = 0
        #: Redis refuses the finishes that keep a result (out of memory): the fetcher
        #: then fetches only jobs whose finish frees memory (see :meth:`wait_room`).
        self.refusing_kept = False
        #: The last finish call failed (Redis away or refusing): until one gets through,
        #: the fetcher holds no more than a pool's worth of outcomes (see wait_room).
        self.failing = False

    def add(self, outcome: Outcome) -> None:
        self._pending.append(outcome)
        self._event.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def unsent(self) -> Iterator[tuple[str, str, str]]:
        """(name, id, token) of every job whose outcome waits to be sent: the pool still
        holds its lease."""
        for o in self._pending:
            yield o.name, o.id, o.token

    async def wait_room(self, limit: int) -> None:
        """Return once fewer than ``limit`` outcomes wait (at once, unless Redis is
        refusing finishes). While Redis refuses only the finishes that keep a result,
        those do not count: the jobs whose finish frees memory must go on being
        fetched, or a full Redis with mixed work would never drain."""
        # While finishes get through, fetching never waits for them: a pool at full
        # speed has more than a pool's worth of outcomes on their way at any moment,
        # and waiting for them made every fetch wait for a finish call.
        while (self.refusing_kept or self.failing) and len(self._pending) - self._held() >= limit:
            self._room = anyio.Event()
            await self._room.wait()

    async def run(self) -> None:
        while True:
            # Held results that Redis refused for memory are tried again now and then;
            # every new outcome is sent at once meanwhile.
            if self.refusing_kept and self._pending:
                with anyio.move_on_after(_KEPT_RETRY):
                    await self._event.wait()
            else:  # the usual turn: no cancel scope to make
                await self._event.wait()
            self._event.clear()
            await anyio.lowlevel.checkpoint()  # let the finishes of this loop turn join the batch
            await self.flush(patient=False)

    async def flush(self, *, patient: bool = True) -> None:
        """Send every pending outcome; retry until Redis takes them. Not ``patient``
        (the pool at work): while Redis refuses the finishes that keep a result, send
        every other outcome, try the held ones once, and return: an outcome that frees
        memory never waits behind one that cannot be written."""
        async with self._lock:
            while self._pending:
                if not patient and self.refusing_kept and self._held() == len(self._pending):
                    await self._try_held()
                    return
                await self.rt.watch.keep_trying("acker", self._send_first)

    def _held(self) -> int:
        """Outcomes that keep a result, held while Redis refuses them for memory."""
        if not self.refusing_kept:
            return 0
        return sum(1 for o in self._pending if o.keeps_result)

    async def _try_held(self) -> None:
        batch = self._pending[:_MAX_BATCH]
        with anyio.CancelScope(shield=True):
            refused, error = await self._send(batch)
        self._pending[: len(batch)] = refused
        self._room.set()
        if error is None:
            self.rt.watch.ok("acker")
        else:
            await self.rt.watch.failed("acker", error)  # a condition: logged once

    async def _send_first(self) -> None:
        """Send the first batch; what Redis refused stays first, and its error is raised.
        While Redis refuses the finishes that keep a result, the others go first: they
        free memory, and must not wait behind a refusal."""
        batch = self._pending[:_MAX_BATCH]
        if self.refusing_kept and self._held() < len(self._pending):
            pending = self._pending
            self._pending = [o for o in pending if not o.keeps_result]
            self._pending += [o for o in pending if o.keeps_result]
            batch = [o for o in self._pending[:_MAX_BATCH] if not o.keeps_result]
        with anyio.CancelScope(shield=True):
            refused, error = await self._send(batch)
        self._pending[: len(batch)] = refused
        self._room.set()
        if error is not None:
            raise error

    def _give_up(self, part: list[Outcome], exc: BaseException) -> None:
        """An error reply to a finish (a role without a permission, a broken library)
        will not mend by sending it again: the outcomes are dropped, and their leases,
        no longer extended, go back to their queues through the reaper (reason
        ``lost``) instead of the pool dying or holding them forever."""
        log.error(
            "Redis refused to record outcomes: their jobs go back to their queues when"
            " their leases expire",
            pool=self.rt.pool_id,
            jobs=[o.id for o in part],
            error=str(exc),
        )
        self._room.set()

    async def _send(self, batch: list[Outcome]) -> tuple[list[Outcome], BaseException | None]:
        """Send one batch: the outcomes Redis did not take, and why."""
        kept = [o for o in batch if o.keeps_result]
        parts = [(True, batch)]
        if kept and len(kept) < len(batch):
            parts = [(False, [o for o in batch if not o.keeps_result]), (True, kept)]
        elif not kept:
            parts = [(False, batch)]
        refused: list[Outcome] = []
        error: BaseException | None = None
        scope, most = self.rt.shard.hot, self.rt.settings.complete_max_count
        for keeps, part in parts:
            try:
                stale = await calls.finish(scope, part, complete_max=most, kept=keeps)
            except Exception as exc:
                if error_reply(exc):
                    self._give_up(part, exc)
                    continue
                cond = condition(exc)
                if cond is None:
                    raise
                if keeps and cond is Condition.OUT_OF_MEMORY:
                    self.refusing_kept = True
                refused += part
                error = exc
                self.failing = True
                continue
            self.failing = False
            if keeps:
                self.refusing_kept = False
            for job_id in stale:
                self.stale += 1
                log.warning("stale finish ignored", job_id=job_id, pool=self.rt.pool_id)
        return refused, error
