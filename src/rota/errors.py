"""The exceptions rota raises, and the two a handler raises to steer its job."""

from __future__ import annotations

from typing import Any

from rota.protocol.bounds import JOB, check

# What the package exports at its top (rota.__all__ takes this list as it is); the
# helpers below (LIFESPAN_NOTE, from_lifespan, redis_cause) are rota's own.
__all__ = [  # noqa: RUF022 (grouped by use, as the comments say)
    # -- what a handler raises to steer its job
    "Abort",
    "Retry",
    # -- errors a caller catches
    "ConfigError",
    "InvalidArgs",
    "JobFailed",
    "JobNotFound",
    "NotReplicated",
    "PayloadTooLarge",
    "RedisRefused",
    "RedisUnavailable",
    "RotaError",
]

#: How the note begins that a pool adds to what its lifespan raised (see from_lifespan).
LIFESPAN_NOTE = "rota: raised by the pool's lifespan"


class RotaError(Exception):
    """Base class of every error rota raises."""


class ConfigError(RotaError, ValueError):
    """A setting has a bad value; the message names the setting."""


class PayloadTooLarge(RotaError, ValueError):
    """The encoded args of a job exceed ``max_args_bytes``."""


class InvalidArgs(RotaError, TypeError):
    """A job's args do not fit its handler's signature or type hints."""


class Retry(RotaError):
    """Raise in a handler to run the job again after ``delay`` seconds (None: after the
    handler's backoff), as ``JobSpec.delay`` delays a first run.

    The attempt counts towards ``max_fails`` like a failure, so a handler that always
    asks for a retry still ends as a dead job.

    ``delay`` is seconds from 0 to ten years (``rota.protocol.bounds.JOB["delay"]``).
    Anything else (NaN, infinity, a negative, an epoch in milliseconds, text) is a
    ValueError here, at construction, naming the value: raised in a handler, that error
    ends the attempt as any other would (a failure with that message, counted by
    ``max_fails``), and no retry is ever written with a time nobody can read.
    """

    def __init__(self, delay: float | None = None, message: str = "retry requested") -> None:
        if delay is not None:
            wrong = check("delay", delay, JOB["delay"])
            if wrong is not None:
                raise ValueError(f"Retry: {wrong}")
        super().__init__(message)
        self.delay = delay


class Abort(RotaError):
    """Raise in a handler to end its job as ``aborted``: no retry, not dead."""


class JobNotFound(RotaError, LookupError):
    """No job has this id (never enqueued, or its record expired)."""


class JobFailed(RotaError):
    """The job a client waited for ended dead or aborted instead of complete."""

    def __init__(self, job_id: str, state: str, reason: str | None, error: str | None) -> None:
        super().__init__(f"job {job_id} ended {state} ({reason}): {error}")
        self.job_id = job_id
        self.state = state
        self.reason = reason
        self.error = error


class RedisRefused(RotaError):
    """Redis answered a client's call with an error reply. ``condition`` names a refusal
    that passes (out of memory, a read-only replica, loading, busy...: see
    :mod:`rota.redis.outage`), and is ``""`` for one waiting does not mend (``NOPERM``:
    the ACL user may not; a wrong password; a key of another type). ``written`` counts
    the jobs of an ``enqueue_many`` that were written before it; a refused call wrote
    nothing else. The reply redis-py raised is its ``__cause__`` (:func:`redis_cause`).
    """

    def __init__(self, message: str, condition: str = "", written: int = 0) -> None:
        super().__init__(message)
        self.condition = condition
        self.written = written


class RedisUnavailable(RotaError):
    """Redis could not be reached: no server there, or the connection was lost or timed
    out (an enqueue first rides through the client's ``ride_through``); redis-py's error
    is its ``__cause__``. Nothing of the call is known to have been written: send it
    again with the same job ids once Redis is back, which enqueues nothing twice."""


def redis_cause(exc: BaseException) -> BaseException:
    """The redis-py error behind one of the two above (what a client call got from
    redis-py), else ``exc``: what tells a wrong password from a refused TLS certificate."""
    cause = exc.__cause__
    if isinstance(exc, RedisRefused | RedisUnavailable) and cause is not None:
        return redis_cause(cause)
    return exc


def from_lifespan(exc: BaseException) -> bool:
    """Whether ``exc`` (or the one error of a group) came from a pool's lifespan: the
    application's own setup, whose own Redis client failing is not rota's ``redis_url``
    failing. The pool marks it with a note, which its traceback shows too."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return from_lifespan(exc.exceptions[0])
    return any(str(n).startswith(LIFESPAN_NOTE) for n in getattr(exc, "__notes__", ()))


class NotReplicated(RotaError):
    """A durable enqueue was written on the primary, but fewer replicas than asked
    acknowledged it within the timeout (``WAIT``). The jobs are there while that primary
    lives; a failover now may lose them. ``jobs`` are what the enqueue returned: enqueue
    them again with the same ``job_id`` (which enqueues nothing if they exist) or check.
    """

    def __init__(self, message: str, jobs: list[Any], acked: int, wanted: int) -> None:
        super().__init__(message)
        self.jobs = jobs
        self.acked = acked
        self.wanted = wanted
