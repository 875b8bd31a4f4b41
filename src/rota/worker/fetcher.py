"""The pool's one fetcher: a batch of jobs per script call, wake lists instead of polling.

When k jobs fit in the pool (free workers, plus room to prefetch while jobs are short;
see :mod:`rota.worker.handoff`) it leases up to k jobs in one call, visiting job names in the
weighted round robin's order. When that finds less than it wanted, it blocks on the wake
lists of its job names, which every script that makes a job runnable pushes to; the
BLPOP timeout is only a safety net for producers that forget to push a wake token.

A name under a rate limit (see :mod:`rota.protocol.rate`) is skipped while its next
start is not due, and the fetch says when that is. The fetcher then waits on the wake
lists as usual, and a local timer ends the wait at that time (CLIENT UNBLOCK): Redis
would end a BLPOP timeout only at its next ``hz`` tick, up to 100 ms late. Without
CLIENT (an ACL user refused it) it sleeps until then instead.

The fetch visits only the names of the ready set.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import Mapping

import anyio
import structlog

from rota import tracing
from rota.protocol import calls
from rota.protocol.job import now_ms
from rota.redis.outage import REDIS_ERRORS
from rota.wire.conn import Conn, hot_path
from rota.worker.acker import Acker
from rota.worker.registry import Handler
from rota.worker.robin import Robin
from rota.worker.rounds import FETCH, rounds_of
from rota.worker.runner import expired
from rota.worker.runtime import Fetched, PoolRuntime
from rota.worker.waits import Wakes

__all__ = ["Fetcher", "expiry_rules", "within_room"]


def expiry_rules(handlers: Mapping[str, Handler]) -> tuple[str, ...]:
    """The fetch script's rules: name, default expiry (ms; "" for none), "1" when dead
    jobs are dropped, for each handler with either. The handler's ``expires_in`` is the
    one place its default lives: the fetch applies it to a job whose record has no
    expiry, from the job's ``enqueued_at`` (a producer does not know the handlers)."""
    rules: list[str] = []
    for name, h in handlers.items():
        if h.expires_in is not None or h.skip_dead:
            default = "" if h.expires_in is None else str(max(1, round(h.expires_in * 1000)))
            rules += (name, default, "1" if h.skip_dead else "")
    return tuple(rules)


def within_room(
    names: list[str], fill: list[str], room: int, isolated: frozenset[str]
) -> tuple[list[str], list[str]]:
    """A fetch's names and fill cut to the isolated handlers' children's room
    (:meth:`rota.worker.isolation.Children.room`). Without room, the robin's turns of
    ``isolated`` names go to the other names (the fill's, in turn); with room, the batch
    is no longer than it when it holds an isolated name (the script fills a batch from
    the names given, so every job of it could be isolated). Never a fill of isolated
    names.

    The other names a cut leaves out of the batch lead the fill: the fill lists only
    the names outside the robin's turns, and a fetch sent behind a wait takes the wake
    token of the name that woke it. Without them, a batch cut to an isolated name whose
    queue was empty took an async job's token and leased nothing, and that job waited
    for the next token (bench.isolation: ticks started up to 170 ms late while the
    children ran the last jobs of a drained queue)."""
    fill = [n for n in fill if n not in isolated]
    if room <= 0:
        others = [n for n in names if n not in isolated] + fill
        if not others:
            return [], fill
        turn = itertools.cycle(others)
        return [next(turn) if n in isolated else n for n in names], fill
    if len(names) > room and any(n in isolated for n in names):
        batch = names[:room]
        skip = set(batch).union(isolated)
        dropped = [n for n in dict.fromkeys(names[room:]) if n not in skip]
        return batch, dropped + [n for n in fill if n not in dropped]
    return names, fill


log = structlog.get_logger("rota.pool")


class Fetcher:
    def __init__(self, rt: PoolRuntime, robin: Robin, acker: Acker | None = None) -> None:
        self.rt = rt
        #: The shard this fetcher leases from (a pool runs one fetcher per shard); its
        #: jobs carry it, so that their outcomes go back to it.
        self.shard = rt.position
        self.shards = rt.shard.total
        self.robin = robin
        self.acker = acker
        self.wake_keys = [rt.keys.wake(name) for name in rt.handlers]
        self.names = list(rt.handlers)
        self._index = {name: i for i, name in enumerate(self.names)}
        # The pool's names in the ready set at the last fetch, in the pool's order (None:
        # not known, the fill then lists every name). Only those are sent as fill: a
        # name that became ready since is in the next reply, or met in the robin's turn.
        self._ready: list[str] | None = None
        self._turn = 0
        self.buried = 0
        self._due = 0  # when a rate-limited name may start its next job (ms; 0: none)
        self._timer: asyncio.TimerHandle | None = None
        self._unblocking: set[asyncio.Task[None]] = set()
        self._client_id: int | None = None
        # A connection of its own: its BLPOP blocks it, and the fetch that follows a
        # wake-up needs no pool checkout (see rota.wire.conn).
        self.conn: Conn = hot_path(rt.redis)
        self.scope = rt.shard.scope.on(self.conn)
        s = rt.settings
        self.lessee = calls.Lessee(
            int(s.lease * 1000), rt.pool_id, s.max_args_bytes, expiry_rules(rt.handlers)
        )
        # The names whose finish deletes the job's record (keep_result 0): what frees a
        # full Redis.
        self.freeing = {name for name, h in rt.handlers.items() if rt.keep_result(h) == 0}
        #: Set when the shards of this one's server (or cluster node: see
        #: rota.worker.nodewaits) wait on their wake lists together (see
        #: rota.worker.waits): this fetcher then waits there, as member ``shard``.
        self.shared: Wakes | None = None
        self.rounds = rounds_of(rt.pool_id)
        #: The names of the isolated handlers, leased within the children's room.
        self.isolated = frozenset(name for name, h in rt.handlers.items() if h.isolated)
        # Set when the children's room frees up during a fetch: a fetch sent behind a
        # wait left their names out, so the next one goes at once, with no wait.
        self._room_freed = False
        self._asked = 0  # how many jobs the last fetch asked for (isolated names only)
        self._taking = 0  # the children's room the fetch under way took (see _fetch)
        # How many jobs the last lease wanted: less than the loop's ``want`` when a wait
        # on the shared wake lists ended with less room than before it (see _lease).
        self._want = 0
        # Set when such a wait ended with no room left: it spent its token, so the next
        # fetch goes at once, with no wait.
        self._spent = False
        self._woken = False  # a shared wait ended, its fetch not yet made
        #: Set when the pool retires this fetcher's shard (see rota.worker.retire).
        self.leaving = False

    async def run(self) -> None:
        self.rounds.nudges[FETCH, self.shard] = self.nudge
        try:
            await self._run()
        finally:
            del self.rounds.nudges[FETCH, self.shard]  # nothing to nudge any more
            with anyio.CancelScope(shield=True):
                await self.conn.aclose()

    async def _run(self) -> None:
        rt = self.rt
        handoff = rt.handoff
        # Stop on the flag, not only on cancellation: while the pool drains, workers hand
        # each fetched job back at once, so slots are free again by the time a fetch
        # returns, the next fetch starts without a checkpoint outside the shield, and the
        # cancellation would never land.
        short = False  # the last fetch found less than it wanted: wait for a wake token
        while not (rt.stopping.is_set() or self.leaving):
            if self.acker is not None:  # Redis refuses finishes: hold no more than a pool's worth
                await self.acker.wait_room(rt.settings.concurrency)
            want = min(await handoff.wait_room(), rt.settings.fetch_batch)
            if self.shards > 1:
                # A turn takes half the room at most: a fetch whose shard hangs (its
                # Redis unreachable until the socket times out) leaves the rest to the
                # other shards. (A share of room / K made calls so small that a job over
                # six shards cost a quarter more Redis commands than over one.)
                want = min(want, max(1, handoff.capacity // 2))
            if await rt.control.parked():  # the operator made the pool quiet
                short = False
                continue
            self.rounds.begin(FETCH, self.shard)
            self._room_freed = self._spent = False
            with rt.control.leasing():
                jobs = await rt.watch.keep_trying(
                    "fetcher", functools.partial(self._lease, want, short)
                )
            self.rounds.end(FETCH, self.shard)
            if self.shard:
                for job in jobs:
                    job.shard = self.shard
            for job in jobs:
                handoff.put(job, self._expire)
            # With isolated names the batch asked for may be smaller than ``want`` (cut to
            # the children's room): short is finding less than was asked.
            asked = self._asked if self.isolated else self._want
            short = (len(jobs) < asked or not asked) and not (self._room_freed or self._spent)

    def _expire(self, job: Fetched) -> None:
        """End ``job``, expired while it waits in the handoff: it never starts, and ends
        on time, not when a worker is free."""
        if self.acker is not None and self.rt.handoff.withdraw(job):
            self.acker.add(expired(job, self.rt.handlers.get(job.name)))
            if job.name in self.isolated and self.rt.children is not None:
                self.rt.children.ended()

    async def _lease(self, want: int, short: bool) -> list[Fetched]:
        """Lease up to ``want`` jobs; after a ``short`` fetch, wait on the wake lists first.

        The room of a fetch that returns at once is taken while it runs, so that the
        fetchers of other shards do not lease it too; a wait on the wake lists takes
        none (other shards' jobs must not wait for it to end), and neither does the
        pause between attempts while this shard's Redis is away."""
        handoff = self.rt.handoff
        held = 0 if short else want
        handoff.reserve(held)
        self._want = want
        jobs: list[Fetched] = []
        try:
            if short and self.shared is not None:
                # Not shielded: a wait here sends nothing, and a stopping pool ends it.
                # A wait that took a token is not waited again when the fetch behind it
                # fails (a slot moved): the retry fetches, or the token would be lost.
                if not self._woken:
                    await self.shared.wait(self.shard, self._wait_time())
                    self._woken = True
                short = False
                # The wait held no room, so the other shards' fetchers may have taken it
                # meanwhile: lease only what is left. Leasing ``want`` as reckoned before
                # the wait let a pool over K shards hold up to K times its room, jobs
                # that other pools' free workers could have run.
                want = self._want = min(want, handoff.room())
                if want <= 0:
                    self._spent = True
                    self._woken = False
                    return []
                held = want
                handoff.reserve(held)
            if short and self._due:
                short = await self._until_due()
            with anyio.CancelScope(shield=True):
                # Shielded: a lease whose reply never arrives would wait for the reaper.
                # (A stopping pool ends the wait with CLIENT UNBLOCK: see unblock.)
                jobs = await (self._wait_and_fetch(want) if short else self._fetch(want))
            self._woken = False
            return jobs
        except Exception:
            self._client_id = None  # the connection may be a new one: ask its id again
            raise
        finally:
            self._disarm()
            handoff.release(held)
            if self.isolated and self.rt.children is not None:
                leased = sum(1 for job in jobs if job.name in self.isolated)
                self.rt.children.leased(leased, self._taking)
                self._taking = 0

    async def _until_due(self) -> bool:
        """Before waiting on the wake lists: make the wait end when a rate-limited job
        is due. Whether to wait at all (False: fetch now)."""
        wait = self._wait_time()
        if wait <= 0:
            return False
        if await self._own_id():
            self._arm(wait)
            return True
        await anyio.sleep(wait)  # no CLIENT UNBLOCK: sleep until the start is due
        return False

    def _wait_time(self) -> float:
        """How long a wait on the wake lists may last: until a rate-limited job is due."""
        wait = self.rt.settings.wake_timeout
        return min(wait, max(0.0, (self._due - now_ms()) / 1000)) if self._due else wait

    def _arm(self, delay: float) -> None:
        """End the coming wait on the wake lists after ``delay`` seconds."""
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        self._unblock_soon()

    def _unblock_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self.unblock())
        self._unblocking.add(task)
        task.add_done_callback(self._unblocking.discard)

    async def _wait_and_fetch(self, want: int) -> list[Fetched]:
        """BLPOP on the wake lists and the fetch behind it, in one write (see
        :func:`rota.protocol.calls.fetch`)."""
        await self._own_id()
        names, fill = self._choose(want, every=True)
        wait = (self.wake_keys, self.rt.settings.wake_timeout)
        return self._read(await calls.fetch(self.scope, self.lessee, names, fill, wait=wait))

    async def _own_id(self) -> int:
        """This connection's client id, which CLIENT UNBLOCK takes; 0 when there is
        none (an ACL user without CLIENT, a pooled connection): a stopping pool then
        waits out the BLPOP."""
        if self._client_id is None:
            self._client_id = await self.conn.client_id()
        return self._client_id

    async def unblock(self) -> None:
        """End a wait of this fetcher (the pool is stopping): its fetch then runs at once
        and the jobs it leases go back to their queues with the others not started."""
        if self._client_id:
            # CLIENT refused (an ACL role), or Redis away: then the wait ends by itself
            # (its connection fails, or the BLPOP times out), and a task that nobody
            # awaits must not leave an exception behind.
            with contextlib.suppress(*REDIS_ERRORS):
                await self.rt.redis.client_unblock(self._client_id)

    def room_freed(self) -> None:
        """The children have room for isolated jobs again: fetch them now."""
        self._room_freed = True
        self.nudge()

    def nudge(self) -> None:
        """End a wait on the wake lists now, as a token would (see rota.worker.rounds)."""
        if self.shared is not None:
            self.shared.nudge(self.shard)
        elif self._client_id:
            self._unblock_soon()

    async def _fetch(self, want: int) -> list[Fetched]:
        names, fill = self._choose(want)
        children = self.rt.children
        if self.isolated and children is not None and not self.isolated.isdisjoint(names):
            # Taken while the call runs, so that other shards' fetches do not lease the
            # same room. Not by a fetch sent behind its own BLPOP (a pool whose shards
            # wait apart, as in a cluster): it would hold the room through the wait.
            self._taking = len(names)
            children.take(self._taking)
        return self._read(await calls.fetch(self.scope, self.lessee, names, fill))

    def _choose(self, want: int, *, every: bool = False) -> tuple[list[str], list[str]]:
        """The names to fetch from, in order, and the fill. ``every``: the fill lists
        every name of the pool (a fetch sent before a wait, when what is ready will have
        changed)."""
        names = self.robin.take(want)
        # The pool's other names fill the batch when the robin's are empty; a rotating
        # start keeps that fill fair between them.
        count = len(self.names)
        k = self._turn % count
        self._turn += 1
        chosen = set(names)
        ready = None if every else self._ready
        if ready is None:
            fill = [n for n in self.names[k:] + self.names[:k] if n not in chosen]
        else:
            index = self._index
            fill = sorted(
                (n for n in ready if n not in chosen), key=lambda n: (index[n] - k) % count
            )
        if self.acker is not None and self.acker.refusing_kept:
            # Redis is full and refuses the finishes that keep a result: fetch only the
            # jobs whose finish frees memory (see Acker.wait_room).
            names = [n for n in names if n in self.freeing]
            fill = [n for n in fill if n in self.freeing]
        if self.isolated and self.rt.children is not None:
            names, fill = within_room(names, fill, self.rt.children.room(), self.isolated)
            self._asked = len(names)
        return names, fill

    def _read(self, reply: calls.FetchReply) -> list[Fetched]:
        if reply.jobs:
            self.rt.traced = tracing.active()  # a provider set since is seen from now on
        self._due = reply.due
        if reply.ready is not None:
            index = self._index
            mine = [s for s in reply.ready if s in index]
            mine.sort(key=index.__getitem__)
            self._ready = mine
        for job_id in reply.buried:
            self.buried += 1
            log.warning("bad payload made dead", job_id=job_id)
        return reply.jobs
