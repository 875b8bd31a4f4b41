"""Heartbeat, reaper and abort listener: how a pool keeps its leases and reclaims others'.

- The heartbeat (every ``heartbeat_interval``) scores the pool in ``{ns}:pools``, stores
  its snapshot and extends the leases of every job it runs, in one script call. Over
  several shards the snapshot (what the web's pools page and the CLI show) is written in
  shard 0 only, where readers take it: elsewhere the beat scores the pool, notes Redis's
  clock and extends what the pool holds there, one command fewer a shard an interval.
  The other shards need not even that while idle: the pool is scored in shard 0 alone,
  beats in another shard only while it holds a job there or the look (one a beat per
  server, rota.worker.idle; one an interval per cluster node, rota.worker.nodelook)
  finds a lease or a scored pool in some shard of it, and their reapers skip their
  pass meanwhile. Shard 0's reaper alone forgets idle job names, in every shard of
  the pool with one turn (rota.client.forget).
- The reaper (about as often, jittered) gives expired leases back to their queues and
  forgets pools that stopped beating. Every pool runs it; the script is idempotent.
- The abort listener cancels a running job within milliseconds of ``client.abort``;
  the heartbeat's answer is the fallback when a pub/sub message was missed, and each
  beat cancels again an attempt whose cancellation was swallowed (see InFlight).
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Callable, Sequence

import anyio
import structlog
from anyio.abc import TaskStatus

from rota.client.forget import forget_idle_names
from rota.client.shard import Shard
from rota.protocol import calls, codec
from rota.protocol.job import now_ms, reply_text
from rota.protocol.reshard import RESHARD_MESSAGE
from rota.protocol.snapshot import BusyWorker, PoolSnapshot
from rota.redis.outage import MEANING, REDIS_ERRORS, condition
from rota.version import __version__
from rota.wire.redispy import wrong_type
from rota.worker.acker import Acker
from rota.worker.idle import ShardLook
from rota.worker.rounds import BEAT, REAP, rounds_of
from rota.worker.runtime import PoolRuntime

__all__ = ["AbortListener", "Heartbeat", "Reaper"]

log = structlog.get_logger("rota.pool")


class Heartbeat:
    def __init__(self, rt: PoolRuntime, acker: Acker | None = None) -> None:
        self.rt = rt
        self.acker = acker
        self.host = socket.gethostname()
        self.beats = 0
        #: Whether each beat reads Redis's memory figures (one heartbeat per server does:
        #: the shards of a pool on one server share their watch).
        self.reads_memory = True
        self.rounds = rounds_of(rt.pool_id)
        self._warned = False  # about a pool commands' key of another type
        #: The tags of the shards where the pool's heartbeat runs, for its snapshot.
        self.serves: Callable[[], list[str]] | None = None
        #: The look over the pool's other shards (on shard 0's server, or per node of a
        #: cluster): shard 0's beat takes it, theirs follow it (None: beat at every
        #: interval, as a shard added during the run does).
        self.look: ShardLook | None = None
        self.skipped = 0  # beats skipped: the pool held nothing in an idle shard

    def snapshot(self) -> PoolSnapshot:
        rt = self.rt
        busy = [
            BusyWorker(e.job.id, e.job.name, e.since, e.message, e.heard_at)
            for e in rt.in_flight.values()
        ]
        return PoolSnapshot(
            id=rt.pool_id,
            host=self.host,
            pid=os.getpid(),
            version=__version__,
            namespace=rt.keys.namespace,
            concurrency=rt.settings.concurrency,
            jobs=sorted(rt.handlers),
            started_at=rt.started_at,
            heartbeat_at=now_ms(),
            busy=busy,
            heartbeat_interval=rt.settings.heartbeat_interval,
            periodic=rt.schedules,
            state=rt.control.state(rt.stopping.is_set()),
            shards=None if self.serves is None else self.serves(),
        )

    async def run(self) -> None:
        """Beat every interval (the pool beats once itself before it starts fetching)."""
        while True:
            if self.rt.position == 0:  # or at once when a command's message comes
                await self.rt.control.until_told(self.rt.settings.heartbeat_interval)
            else:
                await anyio.sleep(self.rt.settings.heartbeat_interval)
            # The probe: after an outage it gets through first, extends this pool's
            # leases before any reaper may take them, and wakes the pool's other tasks.
            await self.rt.watch.keep_trying("heartbeat", self.beat, probe=True)

    async def beat(self) -> None:
        rt = self.rt
        s = rt.settings
        shard = rt.position  # a pool over several shards beats in each, for its jobs
        # (in another than shard 0 only while it holds one there or the look finds a
        # lease or a score in some shard of its server or node: see rota.worker.idle)
        self.rounds.begin(BEAT, shard)
        if shard == 0:  # the operator's command, acknowledged by the snapshot below
            await rt.control.obey(await self._told(), rt.pool_id, s.heartbeat_interval)
        jobs = [e.job for e in rt.in_flight.values()]
        # Leased ahead of a free worker, or a worker reads its parents' results: held too.
        jobs += rt.handoff.waiting()
        jobs += rt.preparing.values()
        held = [(job.name, job.id, job.token) for job in jobs if job.shard == shard]
        if self.acker is not None:  # run, its outcome not written yet: held too
            held += self.acker.unsent()
        quiet = self.look is not None and shard != 0  # scored in shard 0 alone
        if quiet and self.look is not None and not held and self.beats and self.look.idle(rt):
            # Nothing of this pool here, and no lease nor scored pool in any shard of the
            # look: no clock to keep (see rota.worker.idle). The first beat always runs.
            self.skipped += 1
            rt.repeat_cancels()
            self.rounds.end(BEAT, shard)
            return
        lost, aborts, fresh = await calls.heartbeat(
            rt.shard.scope,
            "" if quiet else rt.pool_id,
            codec.encode_json(self.snapshot()) if shard == 0 else b"",
            int(s.heartbeat_interval * 3000),
            rt.lease_deadline(),
            held,
        )
        self.beats += 1
        if fresh and self.beats > 1:
            # Forgotten by a reaper (this pool's heartbeat was late: an outage, a blocked
            # event loop), or Redis lost its data: the names tell them apart, and only
            # what Redis lost is written again (an operator's limit stays).
            if await rt.register(keep=True):
                if self.look is not None:  # the other shards are not scored to say it
                    await self.look.register_again()
                log.warning(
                    "Redis had lost this pool's job names (restarted without persistence,"
                    " or flushed): registered its job names, priorities and limits again",
                    pool=rt.pool_id,
                )
            else:
                log.info("this pool's heartbeat was late: it is listed again", pool=rt.pool_id)
        for job_id in lost:
            entry = rt.in_flight.get(job_id)
            if entry is not None and not entry.lease_lost:
                entry.lease_lost = True
                log.warning(
                    "lease lost: the job was reclaimed; its outcome will be ignored",
                    job_id=job_id,
                    job_name=entry.job.name,
                )
        for job_id in aborts:
            rt.cancel(job_id, "abort")
        rt.repeat_cancels()
        if self.reads_memory:
            await rt.watch.check_memory()
        if self.look is not None and shard == 0:
            await self.look.look()
        self.rounds.end(BEAT, shard)

    async def _told(self) -> str | None:
        """The operator's command for this pool (None: none; see rota.worker.control). A
        ``{ns}:poolcmds`` of another type than a hash (written by hand) reads as none,
        with one warning: it must not stop the heartbeat."""
        rt = self.rt
        try:
            told = await rt.redis.hget(rt.keys.pool_commands, rt.pool_id)
        except Exception as exc:
            if not wrong_type(exc):
                raise
            if not self._warned:
                self._warned = True
                log.warning(
                    "the pool commands' key holds another type than a hash: no command"
                    " reaches this pool until it is deleted",
                    key=rt.keys.pool_commands,
                )
            return None
        return None if told is None else reply_text(told)

    async def stop(self) -> None:
        """Say goodbye: remove this pool's heartbeat at once instead of letting it expire."""
        rt = self.rt
        # Not a transaction: Redis refuses MULTI when it is out of memory, and each
        # removal stands on its own (both are idempotent).
        with anyio.move_on_after(2, shield=True):
            try:
                async with rt.redis.pipeline(transaction=False) as pipe:
                    pipe.zrem(rt.keys.pools, rt.pool_id)
                    pipe.delete(rt.keys.pool(rt.pool_id))
                    if rt.position == 0:  # its command, if any, is done with
                        pipe.hdel(rt.keys.pool_commands, rt.pool_id)
                    for reply in await pipe.execute(raise_on_error=False):
                        if isinstance(reply, Exception) and not wrong_type(reply):
                            raise reply  # (a commands' key of another type: nothing to do)
            except Exception as exc:
                cond = condition(exc)
                if cond is None:
                    raise
                log.warning(
                    "could not remove the heartbeat: other pools forget this one within"
                    " three heartbeat intervals",
                    why=MEANING[cond],
                    error=str(exc) or repr(exc),
                )


#: One reaper pass in this many also forgets idle job names: about once a minute with
#: the default heartbeat.
FORGET_EVERY = 12


class Reaper:
    def __init__(
        self,
        rt: PoolRuntime,
        first: Shard | None = None,
        look: ShardLook | None = None,
        every: Callable[[], Sequence[PoolRuntime]] | None = None,
    ) -> None:
        self.rt = rt
        #: Shard 0's reaper: the shards whose idle job names its pass forgets, the
        #: pool's every shard (None: this one alone). The others' reapers forget none.
        self.every = every
        #: The look over this shard and the pool's other shards on its server (None:
        #: check this shard at every pass): while it finds neither a lease nor a scored
        #: pool there, the pass skips its check (see rota.worker.idle).
        self.look = look
        #: Shard 0, whose pool snapshots say which names live pools serve (a pool over
        #: several shards writes its snapshot there only); None: this shard is it.
        self.first = first
        self.passes = 1  # the first to forget names comes after FORGET_EVERY - 1 others
        self.rounds = rounds_of(rt.pool_id)

    async def run(self) -> None:
        while True:
            # Jittered, so that many pools started together do not reap in step.
            await anyio.sleep(self.rt.settings.heartbeat_interval * random.uniform(1.0, 1.5))
            await self.rt.watch.keep_trying("reaper", self.reap)

    async def reap(self) -> None:
        rt = self.rt
        s = rt.settings
        if rt.watch.calm_for() < s.heartbeat_interval:
            # Redis was away or refusing a moment ago: every pool's heartbeat extends its
            # leases first (it tries every PROBE_INTERVAL), and this pass waits for the
            # next one. Without this a lease that expired during an outage shorter than
            # the lease would be reclaimed before its pool could extend it.
            return
        self.rounds.begin(REAP, rt.position)
        forget = self.passes % FORGET_EVERY == 0
        self.passes += 1
        expiry = int(s.heartbeat_interval * 3000)
        reclaimed, buried, forgotten = calls.ReapReply([], [], [])
        idle = self.look is not None and self.look.idle(rt)
        if not idle and await self._anything_to_reap(expiry):
            reclaimed, buried, forgotten = await calls.reap(
                rt.shard.scope, s.max_lost, expiry, 1000
            )
        for job_id in reclaimed:
            log.warning("lease expired: job requeued", job_id=job_id, reason="lost")
        for job_id in buried:
            log.error("lease expired too often: job is dead", job_id=job_id, reason="lost")
        for pool_id in forgotten:
            log.warning("pool stopped beating: forgotten", pool=pool_id)
        if forget and s.forget_names_after > 0 and self.first is None:
            await self._forget()
        self.rounds.end(REAP, rt.position)

    async def _forget(self) -> None:
        """Forget the job names idle too long in every shard of the pool: one pool per
        FORGET_EVERY passes' interval does it for the namespace, its turn taken and the
        live pools' names read once in shard 0, then one read of the names a shard (see
        rota.client.forget). A shard that does not answer leaves its names to the next
        turn; its errors are not shard 0's."""
        rt, s = self.rt, self.rt.settings
        turn = s.heartbeat_interval * FORGET_EVERY * 0.9
        shards = [r.shard for r in self.every()] if self.every is not None else [rt.shard]
        try:
            names = await forget_idle_names(shards, s.forget_names_after, turn=turn)
        except Exception as exc:
            if len(shards) < 2 or (condition(exc) is None and not isinstance(exc, REDIS_ERRORS)):
                raise
            log.info("job names not forgotten this turn", pool=rt.pool_id, error=str(exc))
            return
        if names:
            log.info("job names idle too long: forgotten", names=names[:20], count=len(names))

    async def _anything_to_reap(self, expiry: int) -> bool:
        """Whether a pass would find a lease to look at or a pool to forget: an idle
        shard costs two commands a pass instead of the script's call and its reads."""
        rt = self.rt
        async with rt.redis.pipeline(transaction=False) as pipe:
            pipe.exists(rt.keys.leased)
            pipe.zcount(rt.keys.pools, "-inf", now_ms() - expiry)
            leased, due = await pipe.execute()
        return bool(leased or due)


class AbortListener:
    def __init__(self, rt: PoolRuntime, channels: list[str] | None = None) -> None:
        self.rt = rt
        #: The abort channels of the shards it listens for (its own shard's, or those of
        #: every shard on its server: one subscription serves them all). In a cluster
        #: shard 0's hears every shard's: a classic PUBLISH is carried to every node,
        #: so a SUBSCRIBE on any node hears it, and one connection a pool listens where
        #: one a shard did. After its node fails over or restarts, ``run`` subscribes
        #: again (on the node that serves shard 0 then); what was published meanwhile is
        #: lost, and the next beat of the job's shard answers the abort, as after any
        #: missed message. The per-node ``SSUBSCRIBE`` connections would carry it too,
        #: but only with an ``SPUBLISH`` from the abort (a sharded channel per shard),
        #: which producers of older versions do not send.
        self.channels = channels or [rt.keys.abort]
        #: The first shard's listener hears of the operator's commands too.
        self.told = rt.keys.pool_commands_told if rt.position == 0 else None
        if self.told is not None:
            self.channels = [*self.channels, self.told]
        self._started = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen; ``task_status`` is told once subscribed, so no abort is missed."""
        # listen() never returns: after each condition it subscribes again.
        await self.rt.watch.keep_trying("abort listener", lambda: self.listen(task_status))

    async def listen(self, task_status: TaskStatus[None]) -> None:
        rt = self.rt
        pubsub = rt.redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*self.channels)
            rt.watch.ok("abort listener")
            if not self._started:
                self._started = True
                task_status.started()
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None or message["type"] != "message":
                    continue
                if message["channel"].decode() != self.told:
                    rt.cancel(message["data"].decode(), "abort")
                elif message["data"].decode() == rt.pool_id:
                    rt.control.told()
                elif message["data"].decode() == RESHARD_MESSAGE:
                    rt.control.on_reshard()
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
