"""Redis replies that mean "not now", and how a long-lived task waits them out.

A Redis that is over ``maxmemory`` (``OOM``), became a replica (``READONLY``, and
``UNBLOCKED`` for a blocked read), is loading its data set (``LOADING``), runs a slow script
(``BUSY``), cannot save (``MISCONF``), or is a cluster in the middle of a change
(``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN``, and ``MOVED`` or ``ASK`` while a slot
moves: see :mod:`rota.redis.topology`) refuses a command for a while and then
takes it again; so does a server that cannot be reached. None of these is a reason for a
pool to die: each task of a pool waits with a capped, growing delay and tries again.
Any other error is a bug (in rota, or a script a user wrote) and is raised as it is.

:func:`condition` names the condition behind an error, and :func:`guarded` turns
redis-py's errors into rota's at the client's boundary. How one pool waits them out is
:class:`rota.redis.watch.Watch`.
"""

from __future__ import annotations

import enum
import functools
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final, ParamSpec, TypeVar

import redis.exceptions as errors

from rota.errors import RedisRefused, RedisUnavailable, RotaError, redis_cause
from rota.wire import redispy

__all__ = [
    "MEANING",
    "REDIS_ERRORS",
    "REPLY_ERRORS",
    "UNREACHABLE_ERRORS",
    "Condition",
    "backoff",
    "condition",
    "error_reply",
    "guarded",
    "out_of_memory",
    "refused",
    "reply",
    "rota_error",
    "tls_refused",
]

T = TypeVar("T")
P = ParamSpec("P")

#: What a Redis call raises: redis-py's errors and the socket's, and rota's for them (a
#: client's call, see :func:`guarded`), which are no redis-py errors.
REDIS_ERRORS: Final = (redispy.RedisError, OSError, RedisRefused, RedisUnavailable)
#: What a Redis that cannot be reached (or stopped answering) raises.
UNREACHABLE_ERRORS: Final = (errors.ConnectionError, errors.TimeoutError, OSError, RedisUnavailable)
#: An error reply of Redis, as redis-py raises it or as rota's error for it.
REPLY_ERRORS: Final = (errors.ResponseError, RedisRefused)


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


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def tls_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS handshake that failed for good (a certificate refused,
    no common protocol): waiting does not mend it, unlike a connection that dropped."""
    for e in _chain(exc):
        if isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLWantReadError):
            continue
        if isinstance(e, ssl.SSLError):
            return True
    text = str(exc)
    return "[SSL:" in text and "EOF" not in text


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
    if isinstance(exc, RotaError) or not isinstance(exc, redispy.REDIS_ERRORS):
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


def backoff(failures: int, cond: Condition = Condition.UNREACHABLE) -> float:
    """Seconds before try ``failures + 1``: 0.1 s, doubling, at most 5 s while Redis is
    away and 1 s while it answers with a refusal (a cheap reply; the pool should notice
    within a second that the condition ended). A pool's probe tries every
    :data:`~rota.redis.watch.PROBE_INTERVAL` instead (see ``Watch.keep_trying``)."""
    cap = 5.0 if cond is Condition.UNREACHABLE else 1.0
    return float(min(cap, 0.05 * 2 ** min(max(failures, 1), 10)))


def error_reply(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reply of Redis that is no condition (a refused
    permission, a script's error, a wrong type...): a pool logs it and carries on."""
    return isinstance(exc, REPLY_ERRORS) and condition(exc) is None


def out_of_memory(info: dict[str, Any]) -> bool:
    """Whether Redis refuses writes for memory, by its ``INFO memory``: over the limit
    with nothing it may evict. (With an eviction policy it evicts instead, which a queue
    must not allow: see docs/operations.md.)"""
    limit, used = int(info.get("maxmemory", 0)), int(info.get("used_memory", 0))
    return 0 < limit <= used and info.get("maxmemory_policy") == "noeviction"
