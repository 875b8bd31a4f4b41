"""``PoolRun``: the tasks of one running pool, started in order and drained in named steps.

:class:`~rota.worker.pool.WorkerPool` registers handlers; a run runs them. Its start
launches the background tasks (abort listener, acker, heartbeat, reaper, scheduler),
then the fetcher and the workers (:mod:`rota.worker.workers`). Its drain stops them in
this order, one named step each: stop fetching, give back the jobs not started, wait for
the running ones up to ``grace``, cancel the rest (those three steps in
:mod:`rota.worker.workers`), flush their outcomes, leave.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from rota.client.rules import recorded_shards
from rota.client.shard import Shard
from rota.config import describe
from rota.protocol.keys import tag_of
from rota.redis.outage import MEANING, condition
from rota.redis.sentinel import follow_primary
from rota.version import __version__
from rota.worker.acker import Acker
from rota.worker.fetcher import Fetcher
from rota.worker.follow import RecordFollower
from rota.worker.heartbeat import AbortListener, Heartbeat, Reaper
from rota.worker.isolation import check_target
from rota.worker.loopwatch import LoopWatch
from rota.worker.nodelook import NodeLook
from rota.worker.rebalance import Rebalancer
from rota.worker.registry import Periodic
from rota.worker.retire import ShardTasks, retire
from rota.worker.robin import Robin
from rota.worker.runtime import PoolRuntime
from rota.worker.scheduler import Scheduler, listen_for_schedulers
from rota.worker.scopes import unwrapped
from rota.worker.together import share
from rota.worker.workers import (
    cancel_the_rest,
    give_back_unstarted,
    run_workers,
    wait_for_workers,
)

__all__ = ["START_ALONE", "PoolRun"]

log = structlog.get_logger("rota.pool")

#: Seconds a pool over several shards waits for the others once one shard has started,
#: before it counts as started and lets the rest join as their Redis answers.
START_ALONE = 1.0


class PoolRun:
    def __init__(self, rt: PoolRuntime, periodic: list[Periodic]) -> None:
        self.rt = rt
        self.periodic = periodic
        # One runtime, acker, fetcher and heartbeat per shard of the namespace (one for
        # most), sharing the workers: a job's outcome goes back to its own shard.
        self.shards = rt.shards()
        self.ackers = [Acker(r) for r in self.shards]
        priorities = {name: h.priority for name, h in rt.handlers.items()}
        self.fetchers = [
            Fetcher(r, Robin(priorities), a) for r, a in zip(self.shards, self.ackers, strict=True)
        ]
        self.heartbeats = [Heartbeat(r, a) for r, a in zip(self.shards, self.ackers, strict=True)]
        self.heartbeats[0].serves = self._beating
        # The shards on one server (or a cluster's node) share their waits, listens and
        # looks (see rota.worker.together).
        shared = share(rt, self.shards, self.fetchers, self.heartbeats, periodic)
        self.together, self.schedulers = shared.count, shared.schedulers
        self.listened = shared.listened
        self.wakes, self.look = shared.wakes, shared.look
        # Over several shards, the parts of the limits follow the work (one pool at a time).
        # Always there: a change of the shard count may give a pool of one shard more
        # (a pass is skipped while the pool serves one).
        look = self.look if isinstance(self.look, NodeLook) else None
        self.rebalancer = Rebalancer(rt, lambda: self.balanced, look)
        if rt.children is not None:  # room for isolated jobs again: fetch them now
            rt.children.on_room.extend(f.room_freed for f in self.fetchers)
        self._fetching = anyio.CancelScope()
        self._background = anyio.CancelScope()
        # Set in ``finally``: when a task of the pool crashes, the drain must not wait
        # forever for tasks that were cancelled.
        self._fetcher_done = anyio.Event()
        self._workers_done = anyio.Event()
        # Each shard's tasks in scopes of their own (a retired shard's end alone), and
        # its ready event (see ShardTasks).
        self.tasks = [ShardTasks() for _ in self.shards]
        # Set once the first shard has checked the namespace's shard count.
        self._count_checked = anyio.Event()
        # Where the tasks of a shard added during the run start (see rota.worker.follow).
        self._bg: TaskGroup | None = None
        self._fetch_tg: TaskGroup | None = None
        self.follower = RecordFollower(self)

    def ready(self, i: int) -> bool:
        """Whether shard ``i`` of the pool has started."""
        return self.tasks[i].ready.is_set()

    @property
    def serving(self) -> list[PoolRuntime]:
        """The runtimes of the shards the pool serves: every one but those retired."""
        return [r for r, t in zip(self.shards, self.tasks, strict=True) if not t.retired]

    @property
    def balanced(self) -> list[PoolRuntime]:
        """The runtimes of the shards whose limits the rebalancer covers: those served
        and those being retired (see :mod:`rota.worker.retire`)."""
        return [r for r, t in zip(self.shards, self.tasks, strict=True) if not t.left]

    def _beating(self) -> list[str]:
        """The tags of the shards whose tasks run (a shard being retired still beats)."""
        tasks = zip(self.shards, self.tasks, strict=True)
        return [tag_of(r.keys.prefix) for r, t in tasks if not t.ended.is_set()]

    def add(self, shard: Shard) -> int:
        """Serve ``shard`` too, at the next place (returned): a change of the
        namespace's shard count named it. Its tasks start as a first shard's do; the
        lists only grow, so that the place a job carries stays its shard's (a shard
        retired and named again is served at a new place)."""
        i = len(self.shards)
        rt = self.rt.beside(shard, i)
        acker = Acker(rt)
        priorities = {name: h.priority for name, h in self.rt.handlers.items()}
        self.shards.append(rt)
        self.ackers.append(acker)
        self.fetchers.append(Fetcher(rt, Robin(priorities), acker))
        self.heartbeats.append(Heartbeat(rt, acker))
        self.schedulers.append(Scheduler(rt, [], listen=True))
        self.tasks.append(ShardTasks())
        self.launch(i)
        return i

    def launch(self, i: int) -> None:
        """Start the tasks of shard ``i``, added during the run (see
        :mod:`rota.worker.follow`): as a first shard's do, once the pool's run does."""
        if self._bg is not None:
            self._bg.start_soon(self._start_shard, i)
        if self._fetch_tg is not None:
            self._fetch_tg.start_soon(self._fetch_from, i)

    def start_retiring(self, i: int) -> bool:
        """Retire shard ``i`` in the background (:func:`rota.worker.retire.retire`);
        False while the background tasks have not started."""
        if self._bg is None:
            return False
        self._bg.start_soon(retire, self, i)
        return True

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Start the pool's tasks, run the block, and drain the pool when it ends."""
        with unwrapped():
            async with anyio.create_task_group() as tg:
                await self.start(tg)
                try:
                    # An operator's stop (rota.worker.control) ends the block as a signal
                    # ends WorkerPool.run's: the drain follows.
                    with anyio.CancelScope() as block:
                        self.rt.control.end_block = block.cancel
                        yield
                finally:
                    self.rt.control.end_block = None
                    with anyio.CancelScope(shield=True):
                        await self.drain()
                    tg.cancel_scope.cancel()

    # -- start ----------------------------------------------------------------------

    async def start(self, tg: TaskGroup) -> None:
        """Start every task in ``tg``: the fetcher only once the pool listens for aborts
        and has beaten once."""
        await tg.start(self._run_background)
        tg.start_soon(self._run_fetcher)
        tg.start_soon(self._run_workers)
        s = self.rt.settings
        # Where each setting that is not a default came from: a config file in the working
        # directory or a ROTA_* variable silently beats what the code passed otherwise.
        log.info("settings", pool=self.rt.pool_id, **describe(s))
        log.info(
            "pool started",
            pool=self.rt.pool_id,
            version=__version__,
            namespace=s.namespace,
            concurrency=s.concurrency,
            jobs=sorted(self.rt.handlers),
        )

    async def _run_background(self, *, task_status: TaskStatus[None]) -> None:
        """Start every shard at once. The run counts as started once every shard has, or
        :data:`START_ALONE` seconds after the first did: the others join as their Redis
        answers (a pool started while one primary of a cluster is down serves the rest)."""
        rt = self.rt
        with self._background, unwrapped():
            async with anyio.create_task_group() as bg:
                if rt.settings.loop_block_warn:
                    bg.start_soon(LoopWatch(rt).run)
                if rt.children is not None:  # the isolated handlers' child processes
                    for handler in rt.handlers.values():
                        if handler.isolated:
                            check_target(handler)
                    await bg.start(rt.children.serve, rt.stopping)
                for i in range(len(self.shards)):
                    bg.start_soon(self._start_shard, i)
                self._bg = bg
                await self._first_shards_ready()
                task_status.started()
                bg.start_soon(self.follower.run)
                bg.start_soon(follow_primary, rt.redis, rt.watch.wake)

    async def _first_shards_ready(self) -> None:
        ready = [t.ready for t in self.tasks]
        async with anyio.create_task_group() as tg:

            async def one(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.deadline = min(
                    tg.cancel_scope.deadline, anyio.current_time() + START_ALONE
                )

            for event in ready:
                tg.start_soon(one, event)
        waiting = [i for i, event in enumerate(ready) if not event.is_set()]
        if waiting:
            log.warning(
                "shards not reachable yet: the pool serves the others, and each of these"
                " once its Redis answers",
                pool=self.rt.pool_id,
                shards=waiting,
            )

    async def _start_shard(self, i: int) -> None:
        """Run shard ``i``'s tasks (until the shard is retired: see
        :mod:`rota.worker.retire`)."""
        try:
            with self.tasks[i].running:
                await self._run_shard(i)
        finally:
            self.tasks[i].ended.set()

    async def _run_shard(self, i: int) -> None:
        """Register shard ``i``, listen for its aborts, beat once in it, then run its
        tasks; its fetcher starts once it is ready (:meth:`_fetch_from`)."""
        shard, heartbeat = self.shards[i], self.heartbeats[i]
        # Redis unreachable, read-only or loading at the start: wait for it, trying as
        # often as a running pool's heartbeat probes (a backoff grown to 5 s left a shard
        # whose primary a replica had replaced unserved for up to 5 s more).
        register = functools.partial(self._register, i)
        await shard.watch.keep_trying("start", register, replies=False, probe=True)
        with unwrapped():
            async with anyio.create_task_group() as tg:
                if i == 0:
                    channels = [r.keys.abort for r in self.shards[: self.listened]]
                    await tg.start(AbortListener(shard, channels).run)
                elif i >= self.listened:
                    await tg.start(AbortListener(shard).run)
                await shard.watch.keep_trying("heartbeat", heartbeat.beat, probe=True)
                self.tasks[i].ready.set()
                if i:
                    log.info("shard started", pool=self.rt.pool_id, shard=i)
                tg.start_soon(self.ackers[i].run)
                tg.start_soon(heartbeat.run)
                look = self.look if self.look is not None and self.look.covers(shard) else None
                every = None if i else (lambda: self.serving)  # shard 0's forgets names
                tg.start_soon(Reaper(shard, self.shards[0].shard if i else None, look, every).run)
                # Periodic jobs are claimed in shard 0 only: once per fire time.
                tg.start_soon(self.schedulers[i].run)
                if i == 0 and self.together > 1:
                    tg.start_soon(listen_for_schedulers, shard, self.schedulers[: self.together])
                if i == 0:
                    if isinstance(self.look, NodeLook):  # one look a node (nodelook)
                        tg.start_soon(self.look.run)
                    tg.start_soon(self.rebalancer.run)

    async def _register(self, i: int) -> None:
        """Make the pool's job names known in shard ``i``. The first shard checks the
        namespace's shard count (a mismatch ends the start with ConfigError); another
        registers once the first has, or at once when its own record of the count
        matches (so a pool starts its other shards while the first one's Redis is
        away)."""
        shard = self.shards[i]
        if (
            i
            and not self._count_checked.is_set()
            and await recorded_shards(shard.redis, shard.keys) != shard.shard.total
        ):
            await self._count_checked.wait()
        await shard.register()
        if i == 0:
            await self.follower.follow()  # a count changed online: serve what it names
            self._count_checked.set()

    async def _run_fetcher(self) -> None:
        try:
            with self._fetching:
                async with anyio.create_task_group() as tg:
                    if self.wakes is not None:
                        tg.start_soon(self.wakes.run)
                    for i in range(len(self.fetchers)):
                        tg.start_soon(self._fetch_from, i)
                    self._fetch_tg = tg
        finally:
            self._fetcher_done.set()

    async def _fetch_from(self, i: int) -> None:
        try:
            with self.tasks[i].fetching:
                await self.tasks[i].ready.wait()
                await self.fetchers[i].run()
        finally:
            self.tasks[i].fetched.set()

    async def _run_workers(self) -> None:
        try:
            await run_workers(self.rt, self.shards, self.ackers)
        finally:
            self._workers_done.set()

    # -- drain ----------------------------------------------------------------------

    async def drain(self) -> None:
        """Stop the pool, losing no job: each step below waits for the one before."""
        self.rt.stopping.set()
        await self._stop_fetching()
        give_back_unstarted(self.rt, self.ackers)
        await wait_for_workers(self.rt, self._workers_done)
        await cancel_the_rest(self.rt, self._workers_done)
        await self._flush_outcomes()
        await self._leave()

    async def _stop_fetching(self) -> None:
        """End the fetcher. One waiting on its wake lists has its fetch queued behind the
        BLPOP (shielded): end the wait, so that fetch runs now and its jobs go back with
        the others not started."""
        self._fetching.cancel()
        while not self._fetcher_done.is_set():
            for fetcher in self.fetchers:
                try:
                    await fetcher.unblock()
                except Exception as exc:
                    if condition(exc) is None:
                        raise
            with anyio.move_on_after(0.05):
                await self._fetcher_done.wait()

    async def _flush_outcomes(self) -> None:
        """Record the outcomes; if Redis stays away, give up after a while: those jobs run
        again once their leases expire (at least once, never lost). A second signal
        shortens that while (to 2 s) but does not skip it: the outcomes of the jobs it
        cancelled are what puts them back at the front of their queues."""
        rt = self.rt
        limit = 2.0 if rt.force.is_set() else max(rt.settings.grace, 5.0)
        # Every shard's at once: a shard whose Redis is away takes none of the others' time.
        with anyio.move_on_after(limit):
            async with anyio.create_task_group() as tg:
                for acker in self.ackers:
                    tg.start_soon(acker.flush)
        pending = sum(acker.pending for acker in self.ackers)
        if pending:
            why = MEANING[rt.watch.current] if rt.watch.current else f"not sent within {limit} s"
            log.error(
                f"outcomes not recorded ({why}): their jobs run again when their leases expire",
                pool=rt.pool_id,
                jobs=pending,
            )

    async def _leave(self) -> None:
        """Stop the background tasks and remove this pool's heartbeat."""
        self._background.cancel()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.rebalancer.stop)
            for heartbeat, tasks in zip(self.heartbeats, self.tasks, strict=True):
                if tasks.ready.is_set():  # a shard that never started holds no heartbeat
                    tg.start_soon(heartbeat.stop)
        stale = sum(acker.stale for acker in self.ackers)
        # Threads a second signal or a deadline left running: the process lives on until
        # they end (the daemon exits without them).
        left = {"threads_running": t} if (t := self.rt.threads.still_running()) else {}
        log.info("pool stopped", pool=self.rt.pool_id, stale_finishes=stale, **left)
