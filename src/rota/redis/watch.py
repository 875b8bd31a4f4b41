"""How one pool waits out a Redis that says "not now" (see :mod:`rota.redis.outage`).

A :class:`Watch` is one pool's view of the conditions: every task reports its failures
and successes to it, and it logs one line when a condition starts (with what it means
for the pool, and the memory figures for ``OOM``) and one when Redis takes every
command again, instead of one line per task. A condition that comes and goes (a Redis
hovering at its memory limit refuses one finish and takes the next) is one episode:
it ends only once no task has been refused for ``settle`` seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio
import structlog
from redis.asyncio import Redis

from rota.redis import outage
from rota.redis.outage import MEANING, Condition, backoff, condition, error_reply, out_of_memory
from rota.wire.redispy import REDIS_ERRORS, ReplyError

__all__ = ["PROBE_INTERVAL", "SETTLE", "Watch", "memory_figures"]

log = structlog.get_logger("rota.redis")

T = TypeVar("T")

#: How often a pool's probe (its heartbeat) tries Redis again during a condition: the
#: pool is back at work within this long of Redis answering, and the heartbeat extends
#: the pool's leases before they can expire (see :class:`Watch`).
PROBE_INTERVAL: Final = 0.05

#: The least calm (seconds without a refusal) that ends an episode: half as long again
#: as the longest wait of a refused task (1 s, see :func:`~rota.redis.outage.backoff`),
#: so a condition that still holds is seen again before its episode could end.
SETTLE: Final = 1.5


class Watch:
    """One pool's view of whether Redis takes its commands.

    Tasks run each step through :meth:`keep_trying`, which calls :meth:`failed` with an
    error (it re-raises anything that is not a condition, and returns how long to wait)
    and :meth:`ok` after a success. The pool
    logs one line when a condition starts, one when it changes, and one when no task
    has failed for ``settle`` seconds and one gets through; ``current`` is the
    condition of the episode (None: none).
    """

    def __init__(
        self,
        pool: str = "",
        redis: Redis | None = None,
        *,
        where: str = "",
        settle: float = SETTLE,
    ) -> None:
        self.pool = pool
        self.where = where  # the Redis URL, without its password, for the operator
        self.settle = settle
        self.current: Condition | None = None
        self._failing: dict[str, int] = {}
        self._told: set[Condition] = set()  # the conditions logged since it started
        self._since = 0.0
        self._redis = redis
        # Set (and replaced) when a failing task gets through: the others stop waiting.
        self._answered = anyio.Event()
        #: When a task last failed for a condition (monotonic): see :meth:`calm_for`.
        self.last_failure = -math.inf
        self._errors_told: set[tuple[str, str]] = set()
        #: What moves away the keys of another type of each shard the watch serves
        #: (true when it moved any): run when a script answers WRONGTYPE.
        self.repairs: list[Callable[[], Awaitable[bool]]] = []
        self._repairing = anyio.Lock()
        self._repaired = 0  # repairs that moved keys

    def calm_for(self) -> float:
        """Seconds since any task of the pool last failed for a condition (inf when
        none ever did). The reaper waits a heartbeat interval of calm before it
        reclaims leases after an outage: every pool's heartbeat extends its leases
        first, so an outage shorter than the lease runs no job twice."""
        if self._failing:
            return 0.0
        return time.monotonic() - self.last_failure

    async def failed(self, task: str, exc: BaseException, *, replies: bool = True) -> float:
        """Note that ``task`` failed with ``exc``; the delay before it tries again.
        ``replies=False`` raises error replies instead of waiting them out (a pool's
        start: a role missing a permission stops it at once, naming the setting)."""
        cond = condition(exc)
        if cond is None and _wrong_type(exc) and await self.repair():
            return 0.0  # the key is out of the way: the next try gets through
        if cond is None:
            if not (replies and error_reply(exc)):
                raise exc
            return self._error_reply(task, exc)
        self.last_failure = time.monotonic()
        n = self._failing.get(task, 0) + 1
        self._failing[task] = n
        if cond is not self.current and self._worth_a_line(cond):
            details: dict[str, Any] = {}
            if cond is Condition.OUT_OF_MEMORY and self._redis is not None:
                with anyio.move_on_after(1):
                    try:
                        details = await memory_figures(self._redis)
                        details.pop("full")
                    except Exception:  # the figures are a courtesy: never fail for them
                        details = {}
            self._begin(cond, task, str(exc) or repr(exc), details)
        return backoff(n, cond)

    async def repair(self) -> bool:
        """Move away the keys of another type (see :mod:`rota.protocol.repair`): whether
        any moved, here or by another task while this one waited for its turn. Only an
        error reply runs it, so the scripts of the hot path check no types; a repair
        that Redis does not take leaves the error to the usual path (tried again)."""
        seen = self._repaired
        async with self._repairing:
            if self._repaired != seen:
                return True
            moved = False
            for repair in self.repairs:
                try:
                    moved = await repair() or moved
                except REDIS_ERRORS:
                    continue
            self._repaired += moved
            return moved

    async def check_memory(self) -> None:
        """Read Redis's memory figures and note whether it is over its limit: a pool
        whose own commands all run there (they free memory) still says so."""
        if self._redis is None:
            return
        try:
            details = await memory_figures(self._redis)
        except ReplyError:  # INFO refused (ACL): the pool learns it from refusals
            self._redis = None
            return
        if details.pop("full"):
            self._failing.setdefault("memory", 1)
            self.last_failure = time.monotonic()
            if self.current is not Condition.OUT_OF_MEMORY:
                self._begin(Condition.OUT_OF_MEMORY, "memory", "used_memory > maxmemory", details)
        elif "memory" in self._failing:
            self.ok("memory")

    def _error_reply(self, task: str, exc: BaseException) -> float:
        """An error reply is no reason for a pool to die (a role missing a permission,
        a script a user changed): it is logged once per task and kind, and the task
        tries again every few seconds."""
        text = str(exc)
        told = (task, text.split(" ", 1)[0])
        if told not in self._errors_told:
            self._errors_told.add(told)
            log.error(
                "Redis answered an error: the pool carries on and tries again",
                pool=self.pool,
                task=task,
                error=text,
            )
        return 5.0

    def _worth_a_line(self, cond: Condition) -> bool:
        """A condition is told once until Redis takes every command again; a dropped
        connection while Redis refuses is part of that refusal, not news."""
        if cond in self._told:
            return False
        return not (cond is Condition.UNREACHABLE and self.current is not None)

    def _begin(self, cond: Condition, task: str, error: str, details: dict[str, Any]) -> None:
        if self.current is None:
            self._since = time.monotonic()
        self.current = cond
        self._told.add(cond)
        if cond is Condition.UNREACHABLE and self.where:  # what to check, by setting name
            details = {**details, "redis_url": self.where, "check": _CHECK}
        log.warning(
            _sentence(cond, details),
            condition=cond.value,
            pool=self.pool,
            task=task,
            error=error,
            **details,
        )

    def wake(self) -> None:
        """The tasks waiting to try again try now (the sentinels named a new primary)."""
        self._answered.set()
        self._answered = anyio.Event()

    def ok(self, task: str) -> None:
        """Note that ``task`` got through. The episode ends at a success once no task
        fails and none has for ``settle`` seconds: a task that gets through while Redis
        still refuses others (a finish that frees memory, taken by a full Redis) or
        between two refusals ends nothing."""
        if self._failing and self._failing.pop(task, None) is not None:
            self.wake()  # the tasks still waiting try again now
        if self.current is None or self._failing:
            return
        if time.monotonic() - self.last_failure < self.settle:
            return
        log.info(
            "Redis takes every command again: the pool carries on",
            condition=self.current.value,
            pool=self.pool,
            lasted=round(max(0.0, self.last_failure - self._since), 3),  # to the last refusal
        )
        self.current = None
        self._told.clear()

    async def keep_trying(
        self,
        task: str,
        step: Callable[[], Awaitable[T]],
        *,
        tell: bool = True,
        probe: bool = False,
        replies: bool = True,
    ) -> T:
        """Run ``step`` until it gets through, waiting out conditions and error replies
        (any other error is raised): every task's one way of riding out a Redis that is
        not there. A task waits until its delay ends or another task gets through,
        whichever comes first; a ``probe`` (the heartbeat) tries every
        :data:`PROBE_INTERVAL`. ``tell=False`` waits them out without reporting to the
        watch (a blocking read says that Redis is back only when it returns: the other
        tasks tell sooner)."""
        failures = 0
        while True:
            try:
                result = await step()
            except Exception as exc:
                if tell:
                    delay = await self.failed(task, exc, replies=replies)
                else:
                    cond = condition(exc)
                    if cond is None:
                        raise
                    failures += 1
                    delay = backoff(failures, cond)
                if probe and condition(exc) is not None:
                    delay = PROBE_INTERVAL
                answered = self._answered
                with anyio.move_on_after(delay):
                    await answered.wait()
            else:
                if tell:
                    self.ok(task)
                return result


async def memory_figures(redis: Redis) -> dict[str, Any]:
    """Redis's memory limit, use and policy, as ``INFO memory`` says them, and whether it
    refuses writes for memory (``full``). INFO runs when Redis is out of memory."""
    info = await redis.info("memory")
    return {
        "maxmemory": info.get("maxmemory_human"),
        "used_memory": info.get("used_memory_human"),
        "maxmemory_policy": info.get("maxmemory_policy"),
        "full": out_of_memory(info),
    }


def _wrong_type(exc: BaseException) -> bool:
    """A script's command met a key of another type: Redis 7 answers ``WRONGTYPE ...``,
    Redis 6.2 ``ERR Error running script ...: WRONGTYPE ...``."""
    return isinstance(exc, outage.REPLY_ERRORS) and "WRONGTYPE" in str(exc)


_CHECK: Final = (
    "that Redis runs at redis_url; for rediss://, redis_tls_ca, redis_tls_cert and redis_tls_key"
)


def _sentence(cond: Condition, details: dict[str, Any]) -> str:
    what = MEANING[cond]
    if cond is Condition.OUT_OF_MEMORY and details.get("maxmemory"):
        what += f" (maxmemory {details['maxmemory']}, used {details.get('used_memory', '?')})"
    if cond in (Condition.OUT_OF_MEMORY, Condition.MISCONF):
        return what + "; enqueues fail, pools keep running and drain what they can"
    if cond is Condition.UNREACHABLE:
        return what + "; pools wait for it and carry on when it is back"
    return what + "; pools wait and carry on when it ends"
