"""The state one running pool shares between its tasks."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from rota.client import Client, Shard
from rota.client.rules import check_shards
from rota.config import Settings
from rota.logging import JobLine
from rota.protocol import calls
from rota.protocol.job import now_ms
from rota.protocol.keys import Keys
from rota.protocol.rate import Rate, parse_rate
from rota.protocol.repair import repair
from rota.protocol.rows import Fetched
from rota.protocol.scripts import ScriptMode, load_all
from rota.protocol.snapshot import Schedule
from rota.redis.watch import SETTLE, Watch
from rota.urls import redacted
from rota.wire.redispy import Redis
from rota.worker.control import Control
from rota.worker.handoff import Handoff
from rota.worker.isolation import Children
from rota.worker.registry import Handler
from rota.worker.threads import HandlerThreads

__all__ = ["Fetched", "InFlight", "PoolRuntime", "worker_task"]

log = structlog.get_logger("rota.pool")


#: The task of the worker running in this context (each worker is a task with a context
#: of its own): looked up once per worker, not once per attempt.
worker_task: ContextVar[asyncio.Task[Any]] = ContextVar("rota_worker_task")


@dataclass(slots=True)
class InFlight:
    """A job a worker is running: what the heartbeat reports and what shutdown cancels.

    Cancelling it (its deadline passed, an abort, the pool's shutdown) cancels the
    worker's task, as ``asyncio.timeout`` does, and :meth:`settle` takes that
    cancellation back when the attempt ends. This is ``asyncio.timeout`` without its
    object, lookup and context manager per attempt: a job without a deadline costs no
    timer, one with a deadline one timer handle.

    A cancellation can be lost inside the handler's awaits: ``asyncio.wait_for`` of
    Python 3.11, which redis-py's send takes when a ``socket_timeout`` is set, returns
    the result instead of raising when the cancellation comes as the write ends. An
    attempt cancelled once could then run on for good (an abort never taking effect),
    so :meth:`repeat` cancels it again once a heartbeat interval has passed, and
    :meth:`settle` takes back every cancellation it made.
    """

    job: Fetched
    task: asyncio.Task[Any]
    since: int
    #: How many cancellations the task had pending when the attempt began.
    cancelling: int
    message: str = ""
    #: Why the attempt is being cancelled: ``"timeout"`` (its deadline passed),
    #: ``"idle"`` (no checkin nor progress for its idle timeout), ``"abort"``,
    #: ``"shutdown"``, ``"left"`` (a second signal leaves its handler's thread running:
    #: see rota.worker.threads), or None (it is not).
    reason: str | None = None
    settled: bool = False
    lease_lost: bool = False  # said once, when the heartbeat learns it
    #: How many times this entry cancelled its task, and when it last did (monotonic).
    cancels: int = 0
    cancelled_at: float = 0.0
    #: The attempt's last sign of life, a checkin or a progress report (ms since the
    #: epoch; 0: none yet, its start is ``since``), and the same on the monotonic clock,
    #: which its idle watch reads (see :meth:`watch_idle`).
    heard_at: int = 0
    heard: float = 0.0
    idle: float = 0.0
    idle_timer: asyncio.TimerHandle | None = None

    def cancel(self, reason: str) -> None:
        if self.reason is None and not self.settled:
            self.reason = reason
            self._cancel()

    def watch_idle(self, idle: float) -> None:
        """Cancel the attempt (reason ``idle``) once it has gone ``idle`` seconds without
        a sign of life (:meth:`hear`), counted from now. One timer handle per attempt,
        moved on when it finds a sign of life newer than its own start: a checkin costs
        a clock read, not a timer. An attempt without an idle timeout has none."""
        self.idle, self.heard = idle, time.monotonic()
        self.idle_timer = asyncio.get_running_loop().call_later(idle, self._idle_check)

    def hear(self) -> None:
        """A sign of life of the attempt: its idle clock starts again."""
        self.heard, self.heard_at = time.monotonic(), now_ms()

    def unwatch(self) -> None:
        """Stop the idle watch (the attempt ended)."""
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None

    def _idle_check(self) -> None:
        left = self.heard + self.idle - time.monotonic()
        if left > 0:
            self.idle_timer = asyncio.get_running_loop().call_later(left, self._idle_check)
        else:
            self.idle_timer = None
            self.cancel("idle")

    def repeat(self, after: float) -> None:
        """Cancel the task again when this entry cancelled it ``after`` seconds ago or
        more and the attempt still runs: that cancellation was swallowed (see above)."""
        due = time.monotonic() - self.cancelled_at >= after
        if self.reason is not None and not self.settled and due:
            self._cancel()

    def _cancel(self) -> None:
        self.cancels += 1
        self.cancelled_at = time.monotonic()
        self.task.cancel()

    def settle(self) -> bool:
        """Take back this entry's cancellations of its task, if it made any (once).
        True when the task is being cancelled by someone else as well."""
        if self.reason is None or self.settled:
            return False
        self.settled = True
        left = self.task.cancelling()
        for _ in range(self.cancels):
            left = self.task.uncancel()
        return left > self.cancelling


@dataclass(slots=True, kw_only=True)
class PoolRuntime:
    """Everything the fetcher, workers, acker and scheduler of one pool share."""

    settings: Settings
    #: The producer's client of the pool's namespace: what a handler enqueues through
    #: (``ctx.client``), and the scheduler's periodic jobs.
    client: Client
    #: The shard this runtime serves: its connection, keys and script calls; and the
    #: namespace's other shards, which the runtimes of :meth:`shards` serve.
    shard: Shard
    others: Sequence[Shard] = ()
    #: Its place among the shards the pool serves (0: shard 0, ``{ns}``): what its
    #: jobs carry, so that their outcomes come back to it. The pool's own, kept for the
    #: run: a change of the shard count adds shards after the others.
    position: int = 0
    handlers: Mapping[str, Handler]
    state: Mapping[str, Any] = field(default_factory=dict)
    pool_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    )
    started_at: int = field(default_factory=now_ms)
    stopping: anyio.Event = field(default_factory=anyio.Event)
    force: anyio.Event = field(default_factory=anyio.Event)
    in_flight: dict[str, InFlight] = field(default_factory=dict)
    # Jobs a worker holds before their handler runs (reading their parents' results):
    # the heartbeat extends their leases too, however long Redis keeps the read waiting.
    preparing: dict[str, Fetched] = field(default_factory=dict)
    job_line: JobLine | None = None  # see WorkerPool.job_line
    #: The threads of the plain ``def`` handlers (the pool's own: they outlive a run).
    threads: HandlerThreads = field(default_factory=HandlerThreads)
    # Whether attempts are traced (rota.tracing.active()), asked once per fetch: until a
    # tracer provider is set, asking OpenTelemetry reads the environment (about 1 µs).
    traced: bool = False
    #: Per job name: how long a complete job's record is kept, with and without a
    #: result, as the finish script takes them (ms, as text); see runner._complete.
    keeps: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The periodic jobs' next and last fire times, as the scheduler last set them.
    schedules: list[Schedule] = field(default_factory=list)
    #: What the operator asked of the pool through Redis (quiet, stop), shared by its
    #: shards' runtimes (see rota.worker.control).
    control: Control = field(default_factory=Control)
    limiter: anyio.CapacityLimiter = field(init=False)
    #: The child processes of the isolated handlers (None: the pool has none).
    children: Children | None = field(init=False, default=None)
    handoff: Handoff = field(init=False)
    watch: Watch = field(init=False)

    def __post_init__(self) -> None:
        self.handoff = Handoff(self.settings.concurrency, self.settings.prefetch)
        self.limiter = anyio.CapacityLimiter(self.settings.concurrency)
        if any(h.isolated for h in self.handlers.values()):
            s = self.settings
            self.children = Children(s.child_processes, s.child_memory_mb)
        # An episode ends after two heartbeats' memory checks without a refusal between.
        settle = max(SETTLE, 2 * self.settings.heartbeat_interval)
        where = redacted(self.settings.redis_url)
        self.watch = Watch(self.pool_id, self.shard.redis, where=where, settle=settle)
        self.watch.repairs.append(self.repair)

    def shards(self) -> list[PoolRuntime]:
        """One runtime per shard of the namespace (see :mod:`rota.protocol.shards`),
        this one first: each over its shard, all sharing the workers, the handoff and
        what runs. Shards on this one's server share its watch too."""
        return [self, *(self.beside(s, i) for i, s in enumerate(self.others, start=1))]

    def beside(self, shard: Shard, position: int) -> PoolRuntime:
        """The runtime of ``shard``, at ``position`` among the pool's shards."""
        # The same settings, handlers and records of what runs (the same objects).
        rt = dataclasses.replace(self, shard=shard, position=position)
        rt.handoff, rt.limiter, rt.children = self.handoff, self.limiter, self.children
        if shard.redis is self.shard.redis:
            rt.watch = self.watch
            self.watch.repairs.append(rt.repair)
        return rt

    async def register(self, *, keep: bool = False) -> int:
        """Make this pool's job names, priorities and limits known to every process (at
        its start, and again when its heartbeat finds that Redis forgot the pool); the
        function library is loaded first unless it is there already. ``keep`` writes
        the values of the names Redis does not know only, and returns how many: what an
        operator changed since the start stays when only the pool's heartbeat record was
        forgotten (a late heartbeat after an outage), not Redis's data."""
        await load_all(self.redis, self.script_mode)
        await self.repair()  # a key of another type would fail the scripts from the start
        k = self.shard.total
        if self.position == 0:
            await check_shards(self.redis, self.keys, k)
            if k > 1:
                await self._register_totals(keep=keep)
        else:  # the count is confirmed (see PoolRun): each shard keeps its own record
            # (never over one a change of the count wrote: see rota.protocol.reshard)
            await self.redis.set(self.keys.shards, k, nx=True)
        # Over several shards a part starts at 0 where there is none ('0?': written only
        # then), and the rebalancer places the whole limit (rota.client.balance).
        names = [
            (
                name,
                h.priority,
                "" if h.max_concurrency is None else str(h.max_concurrency) if k == 1 else "0?",
                "" if h.rate is None else _rate_part(parse_rate(h.rate), k),
            )
            for name, h in self.handlers.items()
        ]
        return await calls.register(self.shard.scope, names, keep=keep)

    async def _register_totals(self, *, keep: bool) -> None:
        """Write the whole limits and rates of the handlers in shard 0 (``keep``: only
        those it has none of); a handler without one removes its name's (not with
        ``keep``)."""
        pipe = self.redis.pipeline(transaction=False)
        for name, h in self.handlers.items():
            rate = None if h.rate is None else parse_rate(h.rate).stored
            for key, whole in (
                (self.keys.limit_totals, h.max_concurrency),
                (self.keys.rate_totals, rate),
            ):
                if whole is not None:
                    (pipe.hsetnx if keep else pipe.hset)(key, name, whole)
                elif not keep:
                    pipe.hdel(key, name)
        await pipe.execute()

    async def repair(self) -> bool:
        """Move away the keys of this shard that hold another type than rota reads (see
        :mod:`rota.protocol.repair`), one warning line per key: whether any moved."""
        moved = await repair(self.shard.scope, list(self.handlers))
        for m in moved:
            log.warning(
                "key of another type moved to its quarantine key: the pool carries on",
                pool=self.pool_id,
                key=m.key,
                type=m.type,
                moved_to=m.to,
            )
        return bool(moved)

    def keep_result(self, handler: Handler) -> float:
        """How long a complete job of ``handler`` keeps its record with a result: the
        handler's own ``keep_result``, else the pool's (0: deleted at its finish)."""
        return self.settings.keep_result if handler.keep_result is None else handler.keep_result

    @property
    def redis(self) -> Redis:
        return self.shard.redis

    @property
    def keys(self) -> Keys:
        return self.shard.keys

    @property
    def script_mode(self) -> ScriptMode:
        """How scripts are called on the shard's server (see ScriptMode)."""
        return self.shard.script_mode

    def lease_deadline(self) -> int:
        return now_ms() + int(self.settings.lease * 1000)

    def cancel(self, job_id: str, reason: str) -> None:
        """Cancel a running job of this pool, if it runs here."""
        entry = self.in_flight.get(job_id)
        if entry is not None:
            log.info("cancelling job", job_id=job_id, job_name=entry.job.name, reason=reason)
            entry.cancel(reason)

    def repeat_cancels(self) -> None:
        """Cancel again the attempts cancelled a heartbeat interval ago or more that still
        run: their handler's awaits swallowed the cancellation (see InFlight)."""
        for entry in list(self.in_flight.values()):
            entry.repeat(self.settings.heartbeat_interval)

    def heard(self, job_id: str) -> None:
        """A sign of life of a running job other than a checkin (a progress report)."""
        entry = self.in_flight.get(job_id)
        if entry is not None:
            entry.hear()

    async def checkin(self, ctx: Any, message: str) -> None:
        entry = self.in_flight.get(ctx.id)
        if entry is None:
            return
        entry.message = message[:200]
        entry.hear()
        await self.redis.zadd(
            self.keys.running(entry.job.name), {entry.job.id: self.lease_deadline()}, xx=True
        )


def _rate_part(rate: Rate, shards: int) -> str:
    """What a pool writes as a shard's part of ``rate``: the whole on one shard; over
    several, 0 where the shard has none ('?'), for the rebalancer to place."""
    return rate.stored if shards == 1 else f"0/{rate.period_ms}?"
