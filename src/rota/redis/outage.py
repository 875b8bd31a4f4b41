"""Redis replies that mean "not now", and how a long-lived task waits them out.

A Redis that is over ``maxmemory`` (``OOM``), became a replica (``READONLY``, and
``UNBLOCKED`` for a blocked read), is loading its data set (``LOADING``), runs a slow script
(``BUSY``), cannot save (``MISCONF``), or is a cluster in the middle of a change
(``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN``, and ``MOVED`` or ``ASK`` while a slot
moves: see :mod:`rota.redis.topology`) refuses a command for a while and then
takes it again; so does a server that cannot be reached. None of these is a reason for a
pool to die: each task of a pool waits with a capped, growing delay and tries again.
Any other error is a bug (in rota, or a script a user wrote) and is raised as it is.

:func:`condition` names the condition behind an error. A :class:`Watch` is one pool's
view of it: every task reports its failures and successes to it, and it logs one line
when a condition starts (with what it means for the pool, and the memory figures for
``OOM``) and one when Redis takes every command again, instead of one line per task.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, ParamSpec, TypeVar

import anyio
import redis.exceptions as errors
import structlog
from redis.asyncio import Redis

from rota.errors import RedisRefused, RedisUnavailable, RotaError, redis_cause
from rota.redis.connection import tls_refused
from rota.redis.redispy import REDIS_ERRORS

__all__ = [
    "MEANING",
    "PROBE_INTERVAL",
    "REDIS_ERRORS",
    "UNREACHABLE_ERRORS",
    "Condition",
    "Watch",
    "backoff",
    "condition",
    "error_reply",
    "guarded",
    "memory_figures",
    "out_of_memory",
    "refused",
    "reply",
    "rota_error",
]

log = structlog.get_logger("rota.redis")

T = TypeVar("T")
P = ParamSpec("P")

#: What a Redis that cannot be reached (or stopped answering) raises.
UNREACHABLE_ERRORS: Final = (errors.ConnectionError, errors.TimeoutError, OSError)


class Condition(enum.StrEnum):
    UNREACHABLE = "unreachable"
    OUT_OF_MEMORY = "out_of_memory"
    READ_ONLY = "read_only"
    LOADING = "loading"
    BUSY = "busy"
    MISCONF = "misconf"
    CLUSTER_CHANGING = "cluster_changing"


#: What each condition means, in words an operator acts on.
MEANING: Final[dict[Condition, str]] = {
    Condition.UNREACHABLE: "Redis cannot be reached",
    Condition.OUT_OF_MEMORY: "Redis refuses writes: out of memory",
    Condition.READ_ONLY: "Redis refuses writes: the server is a read-only replica",
    Condition.LOADING: "Redis is loading its data set",
    Condition.BUSY: "Redis is busy running a script",
    Condition.MISCONF: "Redis refuses writes: it cannot save its data set (MISCONF)",
    Condition.CLUSTER_CHANGING: (
        "the Redis cluster is changing (TRYAGAIN, CLUSTERDOWN, MOVED or ASK)"
    ),
}

# Error replies whose code redis-py leaves in the message (it knows no class for them).
_CODES: Final[dict[str, Condition]] = {
    "OOM": Condition.OUT_OF_MEMORY,
    "READONLY": Condition.READ_ONLY,
    "UNBLOCKED": Condition.READ_ONLY,  # a blocked read ended: the primary became a replica
    "LOADING": Condition.LOADING,
    "BUSY": Condition.BUSY,
    "MISCONF": Condition.MISCONF,
    "TRYAGAIN": Condition.CLUSTER_CHANGING,
    "CLUSTERDOWN": Condition.CLUSTER_CHANGING,
    "MASTERDOWN": Condition.CLUSTER_CHANGING,
    "MOVED": Condition.CLUSTER_CHANGING,  # the slot moved: the next connect finds its owner
    "ASK": Condition.CLUSTER_CHANGING,  # the slot is migrating: wait until it is done
}
_IN_SCRIPT: Final = re.compile(r": -([A-Z]+) ")
_CLASSES: Final[tuple[tuple[type[BaseException], Condition], ...]] = (
    (errors.OutOfMemoryError, Condition.OUT_OF_MEMORY),
    (errors.ReadOnlyError, Condition.READ_ONLY),
    (errors.BusyLoadingError, Condition.LOADING),
    (errors.TryAgainError, Condition.CLUSTER_CHANGING),
    (errors.ClusterDownError, Condition.CLUSTER_CHANGING),
    (errors.MasterDownError, Condition.CLUSTER_CHANGING),
    (errors.AskError, Condition.CLUSTER_CHANGING),  # and MovedError, its subclass
)


def condition(exc: BaseException) -> Condition | None:
    """The "not now" condition ``exc`` reports, or None when it is not one.

    A wrong password, a refused permission or a refused TLS certificate is not a
    condition: waiting does not mend it, so it is raised at once.
    """
    if redis_cause(exc) is not exc:  # rota's error for a redis-py one: read that one
        return condition(redis_cause(exc))
    if isinstance(exc, RedisRefused):
        return Condition(exc.condition) if exc.condition else None
    for kind, cond in _CLASSES:
        if isinstance(exc, kind):
            return cond
    if isinstance(exc, errors.AuthenticationError | errors.AuthorizationError):
        return None
    if tls_refused(exc):  # a certificate refused: waiting does not mend it either
        return None
    if isinstance(exc, UNREACHABLE_ERRORS) or _closed_transport(exc):
        return Condition.UNREACHABLE
    if isinstance(exc, errors.ResponseError):
        text = str(exc)
        named = _CODES.get(text.split(" ", 1)[0])
        if named is None and text.startswith("Error running script"):
            # Redis 6.2 wraps the reply of a command refused inside a script:
            # "Error running script (call to f_...): @user_script:12: -OOM command ..."
            found = _IN_SCRIPT.search(text)
            named = _CODES.get(found.group(1)) if found else None
        return named
    return None


def _closed_transport(exc: BaseException) -> bool:
    """uvloop's answer to a write on a connection the server closed meanwhile: a
    RuntimeError, not an OSError (redis-py drops the connection; the next try opens a
    new one). Seen when a cluster node is killed under a pool."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("unable to perform operation on")


def refused(exc: BaseException, what: str, written: int = 0) -> RedisRefused | None:
    """A :class:`~rota.errors.RedisRefused` for a refusal (not for a lost connection,
    which stays redis-py's ``ConnectionError``), or None."""
    cond = condition(exc)
    if cond is None or cond is Condition.UNREACHABLE:
        return None
    return RedisRefused(f"{MEANING[cond]}: {what} ({reply(exc)})", cond.value, written)


#: The codes redis-py takes off the replies it raises these for.
_STRIPPED: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (errors.OutOfMemoryError, "OOM"),
    (errors.ReadOnlyError, "READONLY"),
    (errors.BusyLoadingError, "LOADING"),
    (errors.NoPermissionError, "NOPERM"),
)


def reply(exc: BaseException) -> str:
    """An error reply as Redis sent it, its code first (``OOM command not allowed...``),
    for the error behind one of rota's too."""
    exc = redis_cause(exc)
    for kind, code in _STRIPPED:
        if isinstance(exc, kind):
            return f"{code} {exc}"
    return str(exc)


def rota_error(exc: BaseException) -> BaseException:
    """What a client's public call raises for ``exc``: :class:`~rota.errors.RedisUnavailable`
    for a Redis that cannot be reached (or a connection lost or timed out),
    :class:`~rota.errors.RedisRefused` for an error reply (the condition it names, if it
    passes); anything else (rota's errors, a ``TimeoutError`` of the caller's) as it is."""
    if isinstance(exc, RotaError) or not isinstance(exc, REDIS_ERRORS):
        return exc
    if type(exc) is TimeoutError:  # a deadline of the caller's (anyio), not the socket's
        return exc
    cond = condition(exc)
    if cond is Condition.UNREACHABLE:
        return RedisUnavailable(f"{MEANING[cond]}: {exc}")
    if cond is not None:
        return RedisRefused(f"{MEANING[cond]} ({reply(exc)})", cond.value)
    return RedisRefused(reply(exc) or type(exc).__name__)


def guarded(call: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``call`` raising rota's errors instead of redis-py's (see :func:`rota_error`), the
    redis-py error its ``__cause__``: the boundary of :class:`rota.Client`'s methods and
    of :mod:`rota.inspect`'s reads."""

    @functools.wraps(call)
    async def guard(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await call(*args, **kwargs)
        except Exception as exc:
            mine = rota_error(exc)
            if mine is exc:
                raise
            raise mine from exc

    return guard


#: How often a pool's probe (its heartbeat) tries Redis again during a condition: the
#: pool is back at work within this long of Redis answering, and the heartbeat extends
#: the pool's leases before they can expire (see :class:`Watch`).
PROBE_INTERVAL: Final = 0.05


def backoff(failures: int, cond: Condition = Condition.UNREACHABLE) -> float:
    """Seconds before try ``failures + 1``: 0.1 s, doubling, at most 5 s while Redis is
    away and 1 s while it answers with a refusal (a cheap reply; the pool should notice
    within a second that the condition ended). A pool's probe tries every
    :data:`PROBE_INTERVAL` instead (see :meth:`Watch.keep_trying`)."""
    cap = 5.0 if cond is Condition.UNREACHABLE else 1.0
    return float(min(cap, 0.05 * 2 ** min(max(failures, 1), 10)))


def error_reply(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reply of Redis that is no condition (a refused
    permission, a script's error, a wrong type...): a pool logs it and carries on."""
    return isinstance(exc, errors.ResponseError) and condition(exc) is None


class Watch:
    """One pool's view of whether Redis takes its commands.

    Tasks run each step through :meth:`keep_trying`, which calls :meth:`failed` with an
    error (it re-raises anything that is not a condition, and returns how long to wait)
    and :meth:`ok` after a success. The pool
    logs one line when a condition starts, one when it changes, and one when no task
    is failing any more; ``current`` is what the pool waits out now (None: nothing).
    """

    def __init__(self, pool: str = "", redis: Redis | None = None, *, where: str = "") -> None:
        self.pool = pool
        self.where = where  # the Redis URL, without its password, for the operator
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

    def calm_for(self) -> float:
        """Seconds since any task of the pool last failed for a condition (inf when
        none ever did). The reaper waits a heartbeat interval of calm before it
        reclaims leases after an outage: every pool's heartbeat extends its leases
        first, so an outage shorter than the lease runs no job twice."""
        if self.current is not None:
            return 0.0
        return time.monotonic() - self.last_failure

    async def failed(self, task: str, exc: BaseException, *, replies: bool = True) -> float:
        """Note that ``task`` failed with ``exc``; the delay before it tries again.
        ``replies=False`` raises error replies instead of waiting them out (a pool's
        start: a role missing a permission stops it at once, naming the setting)."""
        cond = condition(exc)
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

    async def check_memory(self) -> None:
        """Read Redis's memory figures and note whether it is over its limit: a pool
        whose own commands all run there (they free memory) still says so."""
        if self._redis is None:
            return
        try:
            details = await memory_figures(self._redis)
        except errors.ResponseError:  # INFO refused (ACL): the pool learns it from refusals
            self._redis = None
            return
        if details.pop("full"):
            self._failing.setdefault("memory", 1)
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
        """Note that ``task`` got through; the last one to do so ends the condition."""
        if not self._failing or self._failing.pop(task, None) is None:
            return
        self.wake()  # the tasks still waiting try again now
        if self._failing:
            return
        if self.current is not None:
            log.info(
                "Redis takes every command again: the pool carries on",
                condition=self.current.value,
                pool=self.pool,
                lasted=round(time.monotonic() - self._since, 3),
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


def out_of_memory(info: dict[str, Any]) -> bool:
    """Whether Redis refuses writes for memory, by its ``INFO memory``: over the limit
    with nothing it may evict. (With an eviction policy it evicts instead, which a queue
    must not allow: see docs/operations.md.)"""
    limit, used = int(info.get("maxmemory", 0)), int(info.get("used_memory", 0))
    return 0 < limit <= used and info.get("maxmemory_policy") == "noeviction"


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
