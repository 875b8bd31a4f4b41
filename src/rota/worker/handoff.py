"""Where leased jobs wait for a free worker, and how many more the fetcher may lease.

This is the hottest path of a pool: every job passes it twice (the fetcher puts it, a
worker takes it, and its end frees room). It uses a deque and bare asyncio futures
rather than anyio's memory streams and events, whose every send and receive looks up
the running async library and checks cancel scopes: that lookup cost more CPU than
running a no-op job did.

The fetcher keeps ``concurrency`` jobs running and, while jobs are short, up to
``prefetch`` more leased and waiting here, so that a worker that finishes starts its
next job without waiting for a round trip to Redis. Long jobs gain nothing from that
and would hold back jobs other pools could run, so prefetching stops while the average
job takes longer than :data:`PREFETCH_BELOW` seconds, and starts only once as many jobs
as there are workers have finished (before that the pool does not know its jobs). Jobs
waiting here keep their leases: the heartbeat extends them along with the running ones.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from rota.protocol.job import now_ms

if TYPE_CHECKING:
    from rota.protocol.rows import Fetched

__all__ = ["PREFETCH_BELOW", "Handoff"]

#: Prefetch only while the average job (moving average) takes less than this.
PREFETCH_BELOW: Final = 0.25
_EWMA: Final = 0.05


class Handoff:
    __slots__ = (
        "_closed",
        "_expiring",
        "_idle",
        "_jobs",
        "_loop",
        "_room_waiters",
        "avg_duration",
        "concurrency",
        "finished",
        "prefetch",
        "reserved",
        "running",
    )

    def __init__(self, concurrency: int, prefetch: int = 0) -> None:
        self.concurrency = concurrency
        self.prefetch = max(0, min(prefetch, concurrency))
        self.running = 0
        #: Room taken by fetches under way (a pool over several shards fetches from
        #: each at once; see rota.worker.fetcher).
        self.reserved = 0
        self.avg_duration = 0.0
        self.finished = 0
        self._jobs: deque[Fetched] = deque()
        self._idle: deque[asyncio.Future[Fetched | None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Fetchers waiting for room, first come first served: a pool over several
        #: shards has a fetcher per shard, and the one that just fetched must not take
        #: the room again before the others had their turn (its shard would starve
        #: theirs).
        self._room_waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        #: The expiry timers of the jobs waiting here, by ``id(job)``: a worker that takes
        #: one cancels its timer, so that no handle keeps a started job until its expiry.
        self._expiring: dict[int, asyncio.TimerHandle] = {}

    # -- the fetcher's side ------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Jobs this pool holds at most right now: running plus waiting here."""
        if (
            self.prefetch
            and self.finished >= self.concurrency
            and self.avg_duration < PREFETCH_BELOW
        ):
            return self.concurrency + self.prefetch
        return self.concurrency

    def room(self) -> int:
        """How many more jobs the fetcher may lease now."""
        return self.capacity - self.running - len(self._jobs) - self.reserved

    def _worth_fetching(self) -> bool:
        room = self.room()
        if room <= 0:
            return False
        # With jobs still waiting here, or another shard's fetch under way to bring some,
        # the workers are not short of work: wait until a quarter of the capacity is
        # free, so that one fetch leases a useful batch (a fetch costs Redis about ten
        # commands whatever it leases: small ones made a job over six shards cost 17 %
        # more Redis commands than over one).
        if self._jobs or self.reserved:
            return room >= max(1, self.capacity // 4)
        return True

    async def wait_room(self) -> int:
        """Wait until a fetch is worth it and no fetcher that came first still waits;
        how many jobs to lease."""
        if self._room_waiters or not self._worth_fetching():
            loop = asyncio.get_running_loop()
            turn = False  # woken, but the room went to another: first in line again
            while True:
                waiter = loop.create_future()
                if turn:
                    self._room_waiters.appendleft(waiter)
                else:
                    self._room_waiters.append(waiter)
                try:
                    await waiter
                except asyncio.CancelledError:
                    if waiter in self._room_waiters:
                        self._room_waiters.remove(waiter)
                    elif not waiter.cancelled():
                        self._wake_fetcher()  # its turn came: pass it on
                    raise
                if self._worth_fetching():
                    break
                turn = True
        return self.room()

    def reserve(self, room: int) -> None:
        """A fetch takes ``room`` (0: it waits on its wake lists first, taking none)
        until :meth:`release`. Its turn is taken: the next fetcher in line may go now if
        what is left is worth a fetch (otherwise a fetch that waits would hold up the
        others until a job ends, and a pool whose queues are all paused has none)."""
        self.reserved += room
        if self._room_waiters:
            self._wake_fetcher()

    def release(self, reserved: int) -> None:
        """A fetch that took ``reserved`` of the room is back: the room is free again for
        the fetchers of other shards waiting for it."""
        self.reserved -= reserved
        if reserved:
            self._wake_fetcher()

    def put(self, job: Fetched, expire: Callable[[Fetched], None] | None = None) -> None:
        """Give a leased job to an idle worker, or keep it until one is free; ``expire``
        is called with a job kept here that still waits at its expiry (a pool leases
        ahead of its workers)."""
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                self.running += 1
                waiter.set_result(job)
                return
        self._jobs.append(job)
        if expire is not None and job.expires:
            self._arm(job, expire)

    def _arm(self, job: Fetched, expire: Callable[[Fetched], None]) -> None:
        """Call ``expire`` with ``job`` once its expiry has passed by the clock the
        records keep. A loop's timer may fire a little early by that clock (uvloop's
        counts from a loop time read at the start of an iteration): one that does arms
        again for the rest, so that a job never ends ``expired`` before its time."""
        self._expiring[id(job)] = asyncio.get_running_loop().call_later(
            max(0, (job.expires or 0) - now_ms()) / 1000, self._due, job, expire
        )

    def _due(self, job: Fetched, expire: Callable[[Fetched], None]) -> None:
        if (job.expires or 0) > now_ms():
            self._arm(job, expire)
        else:
            expire(job)

    def withdraw(self, job: Fetched) -> bool:
        """Take back ``job`` before a worker starts it (it expired); False when a worker
        has taken it already, or the handoff closed."""
        try:
            self._jobs.remove(job)
        except ValueError:
            return False
        if (timer := self._expiring.pop(id(job), None)) is not None:
            timer.cancel()
        self._wake_fetcher()
        return True

    def waiting(self) -> list[Fetched]:
        """Jobs leased and not started (the heartbeat extends their leases too)."""
        return list(self._jobs)

    def close(self) -> list[Fetched]:
        """Stop handing out jobs: idle workers return; the jobs not started are returned
        for the caller to give back to their queues."""
        self._closed = True
        jobs = list(self._jobs)
        self._jobs.clear()
        for timer in self._expiring.values():
            timer.cancel()
        self._expiring.clear()
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
        return jobs

    # -- the workers' side -------------------------------------------------------------

    async def take(self) -> Fetched | None:
        """The next job to run; None once closed."""
        if self._jobs:
            self.running += 1
            job = self._jobs.popleft()
            if self._expiring and (timer := self._expiring.pop(id(job), None)) is not None:
                timer.cancel()
            if not self._jobs:
                self._wake_fetcher()
            # Let the fetcher and the acker run between jobs: a worker whose handlers
            # never await would otherwise empty the whole line before a refill starts.
            await asyncio.sleep(0)
            return job
        if self._closed:
            return None
        loop = self._loop
        if loop is None:  # asked once: each ask costs a system call (getpid) on 3.11
            loop = self._loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Fetched | None] = loop.create_future()
        self._idle.append(waiter)
        # ``put`` counts the job as running when it hands it over; a worker cancelled at
        # the same moment gives it back to the front of the line.
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                handed = waiter.result()
                if handed is not None:
                    self.running -= 1
                    self._jobs.appendleft(handed)
            raise

    def done(self, duration: float) -> None:
        """A worker finished a job that took ``duration`` seconds."""
        self.running -= 1
        self.finished += 1
        # The first jobs set the average (no prefetching until as many jobs as workers
        # have finished: a fresh pool does not know yet whether its jobs are short).
        weight = max(_EWMA, 1 / self.finished)
        self.avg_duration += (duration - self.avg_duration) * weight
        self._wake_fetcher()

    def _wake_fetcher(self) -> None:
        waiters = self._room_waiters
        if waiters and self._worth_fetching():
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
