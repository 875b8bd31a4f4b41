"""One attempt of one job: decode, check, run the middleware chain, decide the outcome."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import structlog

from rota import tracing
from rota.errors import Abort, InvalidArgs, Retry
from rota.protocol import codec
from rota.protocol.bounds import JOB, MAX_DELAY, check
from rota.protocol.job import Reason, now_ms
from rota.protocol.rows import MAX_LOG, Aborted, Complete, Dead, Drop, Outcome, Requeue
from rota.protocol.rows import Retry as Again
from rota.redis.outage import REDIS_ERRORS
from rota.worker.context import JobContext
from rota.worker.isolation import ChildFailed, Crashed
from rota.worker.registry import Handler, default_backoff
from rota.worker.runtime import Fetched, InFlight, PoolRuntime, worker_task
from rota.worker.tracebacks import describe

__all__ = ["expired", "run_job"]

log = structlog.get_logger("rota.job")


def _structlog_vars() -> tuple[ContextVar[Any], ContextVar[Any]]:
    """The context variables behind structlog's bound ``job_id`` and ``job_name``, so
    that an attempt sets them with two calls instead of a ``bind_contextvars`` each."""
    tokens = structlog.contextvars.bind_contextvars(job_id=None, job_name=None)
    structlog.contextvars.reset_contextvars(**tokens)
    return tokens["job_id"].var, tokens["job_name"].var


_JOB_ID, _JOB_NAME = _structlog_vars()


#: The error of an attempt whose handler thread a second signal left running.
_LEFT = "stopped with its handler thread still running: it runs again once its lease expires"

#: The most of a traceback kept in the job's log (as much as a log line holds).
_TRACEBACK_CHARS = MAX_LOG


def _keep_ms(seconds: float) -> int:
    return int(seconds * 1000)


def _failure(
    job: Fetched,
    handler: Handler,
    reason: Reason,
    error: str,
    delay: float | None = None,
) -> Outcome:
    """Retry after a backoff, or dead (dropped when ``skip_dead``) after ``max_fails``."""
    max_fails = job.max_fails or handler.max_fails
    failures = job.failures + 1
    if failures >= max_fails:
        return (Drop if handler.skip_dead else Dead).of(job, reason, error)
    if delay is None or check("delay", delay, JOB["delay"]) is not None:
        # (Retry refuses a delay out of range; one set on it afterwards is not taken)
        delay = _backoff(handler, failures)
    return Again.of(job, now_ms() + int(delay * 1000), error, reason)


def _backoff(handler: Handler, failures: int) -> float:
    """The handler's backoff for retry number ``failures``, within 0 to ten years
    (``rota.protocol.bounds.MAX_DELAY``). What a backoff function returns out of range
    never reaches the retry set: a number below 0 retries at once, one above (1e300,
    infinity) at the bound; anything that is no number (NaN, None, text, a bool) or a
    function that raises falls back to :func:`~rota.worker.registry.default_backoff`.
    Each of these is one warning naming the handler and the value."""
    try:
        value: Any = handler.backoff(failures)
    except Exception as exc:
        value = exc
    if check("backoff", value, JOB["delay"]) is None:
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        used = MAX_DELAY if value > MAX_DELAY else 0.0  # (NaN is the one unequal to itself)
    else:
        used = default_backoff(failures)
    log.warning(
        "backoff out of range",
        job_name=handler.name,
        value=repr(value)[:200],
        used=round(used, 3),
        range=str(JOB["delay"]),
    )
    return used


def _call(
    rt: PoolRuntime,
    job: Fetched,
    handler: Handler,
    ctx: JobContext | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Callable[[], Awaitable[Any]]:
    """The handler call wrapped in the pool's and the handler's middleware; a plain
    ``def`` handler runs in a thread (see rota.worker.threads)."""
    func = handler.func
    if handler.isolated:  # in a child process (rota.worker.isolation), which binds again
        children = rt.children
        assert children is not None and ctx is not None

        async def call() -> Any:
            return await children.run(handler, ctx, job)

        chain: Callable[[], Awaitable[Any]] = call
        for mw in reversed(handler.middleware):
            chain = functools.partial(mw, ctx, chain)
        return chain
    if handler.wants_ctx:
        args = (ctx, *args)
    if handler.is_async and not handler.middleware:  # the coroutine itself, no wrapper
        return functools.partial(func, *args, **kwargs)
    if handler.is_async:

        async def call() -> Any:
            return await func(*args, **kwargs)

    else:

        async def call() -> Any:
            return await rt.threads.run(job, functools.partial(func, *args, **kwargs), rt.limiter)

    chain = call
    for mw in reversed(handler.middleware):
        chain = functools.partial(mw, ctx, chain)
    return chain


async def run_job(rt: PoolRuntime, job: Fetched) -> Outcome | None:
    """Run one attempt and return what the finish script must record, or None when
    nothing is to be recorded: a second signal left its handler's thread running, and
    the job's lease, no longer extended, expires. Never raises, except for the
    cancellation of the pool itself."""
    start = time.perf_counter()
    # Each worker is its own task with its own context: binding without a reset is
    # enough, the next attempt of this worker binds over it.
    _JOB_ID.set(job.id)
    _JOB_NAME.set(job.name)
    if rt.traced:
        with tracing.consumer_span(job.id, job.name, job.attempts, job.trace) as span:
            outcome = await _attempt(rt, job)
            if span is not None:
                _describe(span, outcome)
    else:
        outcome = await _attempt(rt, job)
    fields: dict[str, Any] = {
        "job_name": job.name,
        "job_id": job.id,
        "attempt": job.attempts,
        "outcome": outcome.kind if outcome is not None else "left",
        "duration_ms": round((time.perf_counter() - start) * 1000, 3),
    }
    level = "info"
    if outcome is None:
        level = "warning"
        fields["reason"], fields["error"] = "shutdown", _LEFT
    elif outcome.kind != "complete" and outcome.failed:
        level = "warning"
        fields["reason"] = outcome.reason
        fields["error"] = outcome.error
    if rt.job_line is not None:
        rt.job_line(level, fields)
    elif level == "info":
        log.info("job", **fields)
    else:
        log.warning("job", **fields)
    return outcome


def _describe(span: Any, outcome: Outcome | None) -> None:
    """What the consumer span says of an attempt's end."""
    if outcome is None:
        span["outcome"], span["reason"], span["error"] = "left", "shutdown", _LEFT
        return
    span["outcome"] = outcome.kind
    if outcome.failed:
        span["reason"], span["error"] = outcome.reason, outcome.error


async def _parent_results(rt: PoolRuntime, job: Fetched) -> dict[str, Any]:
    """The parents' results, read for the job before its handler runs. A Redis that is
    away or refusing is waited out as every task of the pool waits it out (an outage is
    no failure of the job), while the heartbeat keeps the job's lease."""
    rt.preparing[job.id] = job
    try:
        return await rt.watch.keep_trying(
            "parent results", lambda: rt.shard.dependency_results(job.id), replies=False
        )
    finally:
        del rt.preparing[job.id]


def expired(job: Fetched, handler: Handler | None) -> Outcome:
    """The outcome of a leased job whose expiry came before a worker started it: dead
    with reason expired, as the fetch script ends one (dropped for a ``skip_dead``
    handler)."""
    error = f"expired at {job.expires} ms, before it started"
    drop = handler is not None and handler.skip_dead
    return (Drop if drop else Dead).of(job, Reason.EXPIRED, error)


async def _attempt(rt: PoolRuntime, job: Fetched) -> Outcome | None:
    handler = rt.handlers.get(job.name)
    if handler is None:
        return Dead.of(job, Reason.UNKNOWN_JOB, f"no handler for job name {job.name!r}")
    try:
        decoded = codec.decode_args(job.args)
        args, kwargs = handler.bind(decoded)
    except codec.BadPayload as exc:
        return Dead.of(job, Reason.BAD_PAYLOAD, str(exc))
    except InvalidArgs as exc:
        return Dead.of(job, Reason.INVALID_ARGS, str(exc))
    parents: dict[str, Any] = {}
    if job.deps:  # one read for all the parents, not one per parent in the handler
        try:
            parents = await _parent_results(rt, job)
        except REDIS_ERRORS as exc:  # an error reply: no outage, and no waiting mends it
            return _failure(job, handler, Reason.ERROR, f"parent results not read: {exc}")
    started = now_ms()
    # The expiry is weighed against the attempt's start itself, after every wait before
    # it (in the pool, and for the parents' results, read through an outage if need
    # be): a job never starts at or after its expiry, and its start time says so.
    if job.expires and started >= job.expires:
        return expired(job, handler)
    # The context is made when the handler or a middleware takes it: a plain handler's
    # attempt makes none.
    ctx = None
    if handler.wants_ctx or handler.middleware or handler.isolated:
        ctx = _context(rt, job, decoded, started, parents)
    timeout = job.timeout if job.timeout is not None else handler.timeout
    # In flight until it ends: shutdown, abort and the deadline cancel it through its
    # entry (see InFlight); not an anyio scope nor an asyncio timeout, made per attempt.
    task = worker_task.get(None) or asyncio.current_task()
    assert task is not None
    entry = rt.in_flight[job.id] = InFlight(job, task, started, task.cancelling())
    timer = None
    if timeout is not None:
        loop = asyncio.get_running_loop()
        timer = loop.call_at(loop.time() + timeout, entry.cancel, "timeout")
    if handler.idle_timeout is not None:  # whichever comes first cancels: its reason says
        entry.watch_idle(handler.idle_timeout)
    try:
        result = await _call(rt, job, handler, ctx, args, kwargs)()
    except asyncio.CancelledError:
        if entry.reason is None or entry.settle():  # not this attempt's, or not only
            raise
        return _cancelled(rt, job, handler, entry.reason, timeout)
    except Retry as exc:
        return _failure(job, handler, Reason.RETRY, str(exc), exc.delay)
    except Abort as exc:
        return Aborted.of(job, _keep_ms(rt.settings.keep_result), str(exc) or "aborted")
    except Crashed as exc:  # the isolated handler's child died under the attempt
        return _failure(job, handler, Reason.CRASHED, str(exc))
    except ChildFailed as exc:  # raised in the child: told as a thread's failure is
        failed = _failure(job, handler, Reason.ERROR, f"{exc.kind}: {exc}")
        return _with_traceback(failed, job, exc, exc.trace)
    except (Exception, SystemExit) as exc:  # a handler's failure is the job's, not the pool's
        failed = _failure(job, handler, Reason.ERROR, f"{type(exc).__name__}: {exc}")
        return _with_traceback(failed, job, exc)
    finally:
        if timer is not None:
            timer.cancel()
        if entry.idle_timer is not None:  # checked here: no call for an attempt without one
            entry.unwatch()
        rt.in_flight.pop(job.id, None)
        entry.settle()  # the handler swallowed the cancellation: take it back
    return _complete(rt, job, handler, result)


def _context(
    rt: PoolRuntime, job: Fetched, args: Any, started: int, parents: dict[str, Any]
) -> JobContext:
    return JobContext(
        rt,
        id=job.id,
        name=job.name,
        args=args,
        attempt=job.attempts,
        token=job.token,
        enqueued_at=job.enqueued_at / 1000,  # the public API speaks seconds
        started_at=started / 1000,
        parent_results=parents,
    )


def _with_traceback(
    failed: Outcome, job: Fetched, exc: BaseException, trace: str | None = None
) -> Outcome:
    """The failed attempt's traceback, for the job's own log (the job page and ``rota
    job show`` print it; the outcome's error stays its one line): the finish writes it
    with the outcome (a dropped job's log goes with it: none is made). Its end is kept
    when it is long: the frames nearest the error."""
    if not isinstance(failed, (Again, Dead)) or failed.__class__ is Drop:
        return failed
    told = describe(exc, _TRACEBACK_CHARS) if trace is None else trace
    text = f"attempt {job.attempts} failed:\n{told}"
    if len(text) > _TRACEBACK_CHARS:
        text = "…" + text[-(_TRACEBACK_CHARS - 1) :]
    # A file name read from a disk that is not UTF-8 holds lone surrogates, which no
    # encoder writes: the whole finish call it travels in would fail.
    return failed._replace(log=text.encode(errors="replace").decode())


def _cancelled(
    rt: PoolRuntime, job: Fetched, handler: Handler, reason: str, timeout: float | None
) -> Outcome | None:
    """The outcome of an attempt cancelled from outside, by its reason."""
    if reason == "shutdown":  # not a failure: it runs again, first in its queue
        return Requeue.of(job)
    if reason == "left":  # its thread runs on: put back now, the job could run twice
        return None
    if reason == "abort":
        return Aborted.of(job, _keep_ms(rt.settings.keep_result), "abort requested")
    if reason == "timeout" and timeout is not None:
        return _failure(job, handler, Reason.TIMEOUT, f"timed out after {timeout:g} s")
    if reason == "idle" and handler.idle_timeout is not None:
        error = f"idle: no checkin nor progress for {handler.idle_timeout:g} s"
        return _failure(job, handler, Reason.IDLE, error)
    return _failure(job, handler, Reason.ERROR, f"cancelled: {reason}")


def _keeps(rt: PoolRuntime, handler: Handler) -> tuple[str, str]:
    """How long the finish keeps a complete job's record, with and without a result (ms,
    as the script takes them). A handler's own keep_result keeps every record; the
    pool's keeps those with a result, and keep_none those without (when nobody waits
    for them and they have no children and no group: the finish script tells)."""
    keep_none = rt.settings.keep_none if handler.keep_result is None else handler.keep_result
    return str(_keep_ms(rt.keep_result(handler))), str(_keep_ms(keep_none))


def _complete(rt: PoolRuntime, job: Fetched, handler: Handler, result: Any) -> Outcome:
    keeps = rt.keeps.get(job.name)
    if keeps is None:  # once per name: the run path builds the outcome without a call
        keeps = rt.keeps[job.name] = _keeps(rt, handler)
    try:
        encoded = codec.encode_json(result).decode() if result is not None else ""
    except Exception as exc:  # the job succeeded; only its result is odd
        log.warning(
            "result not JSON-encodable: stored as its description", job_id=job.id, error=repr(exc)
        )
        encoded = codec.encode_json(f"<unencodable {type(result).__name__}: {exc}>").decode()
    # What Complete.of builds, made as NamedTuple._make makes it: one C call.
    return tuple.__new__(Complete, (job.id, job.name, job.token, encoded, *keeps))
