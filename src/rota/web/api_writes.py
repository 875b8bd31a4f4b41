"""The JSON API's writes: a queue paused, resumed, limited or cleared, jobs of a set
retried or deleted, a job aborted, a job enqueued (see :mod:`rota.web.api`).

A body is JSON of its request type (:mod:`rota.web.request_bodies`), checked whole
before anything is done, so a refused request changes nothing.
"""

from __future__ import annotations

import math
import time
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from rota.client import JobSpec
from rota.client.spec import epoch_seconds, moment_seconds
from rota.errors import JobNotFound, PayloadTooLarge
from rota.protocol import codec
from rota.web import bodies as b
from rota.web import views
from rota.web.base import ApiError, JSONResponse, client_of, known_queue
from rota.web.request_bodies import (
    MAX_DELAY,
    MAX_FAILS,
    MAX_IDS,
    MAX_LIMIT,
    MAX_UNIQUE,
    MIN_TIMEOUT,
    EnqueueRequest,
    Ids,
    LimitRequest,
    RateRequest,
)
from rota.web.schemas import documented, json_answer

__all__ = ["abort", "clear", "enqueue", "pause", "resume", "set_action", "set_limit", "set_rate"]


async def _body(request: Request, kind: type[Any]) -> Any:
    """The request's JSON body as ``kind``: 415 unless it is JSON, 400 when it does not
    parse, 422 when it does not fit."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "send the body as application/json")
    raw = await request.body()
    try:
        codec.parse_input(raw)  # not UTF-8, too deep, a key given twice: say which
        msgspec.json.decode(raw)  # and what JSON itself refuses (NaN, Infinity)
    except (ValueError, msgspec.DecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise ApiError(422, str(exc)) from None


@documented("queue_pause", b.QueueState, 404)
async def pause(request: Request) -> Response:
    """Pause a queue."""
    name = await known_queue(request)
    await client_of(request).admin.pause(name)
    return JSONResponse(b.QueueState(name, paused=True))


@documented("queue_resume", b.QueueState, 404)
async def resume(request: Request) -> Response:
    """Resume a queue."""
    name = await known_queue(request)
    await client_of(request).admin.resume(name)
    return JSONResponse(b.QueueState(name, paused=False))


@documented("queue_rate", b.QueueRate, 400, 404, 415, 422, request=RateRequest)
async def set_rate(request: Request) -> Response:
    """Set or remove the rate limit of a queue (across all pools)."""
    name = await known_queue(request)
    body: RateRequest = await _body(request, RateRequest)
    try:
        await client_of(request).admin.set_rate(name, body.rate)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    (info,) = await client_of(request).admin.queues([name])
    return JSONResponse(b.QueueRate(name, info.rate))


@documented("queue_limit", b.QueueLimit, 400, 404, 415, 422, request=LimitRequest)
async def set_limit(request: Request) -> Response:
    """Set or remove the concurrency limit of a queue (across all pools)."""
    name = await known_queue(request)
    body: LimitRequest = await _body(request, LimitRequest)
    if body.limit is not None and not 1 <= body.limit <= MAX_LIMIT:
        raise ApiError(422, f"limit: give 1 to {MAX_LIMIT} jobs at once, or null for no limit")
    await client_of(request).admin.set_limit(name, body.limit)
    return JSONResponse(b.QueueLimit(name, body.limit))


@documented("queue_clear", b.Cleared, 404)
async def clear(request: Request) -> Response:
    """Clear a queue."""
    name = await known_queue(request)
    return JSONResponse(b.Cleared(name, await client_of(request).admin.clear_queue(name)))


def set_action(which: views.JobSet, action: str) -> Any:
    async def act(request: Request) -> Response:
        body: Ids = await _body(request, Ids)
        if body.all == (body.ids is not None):
            raise ApiError(422, 'give "ids" (a list of job ids) or "all": true, not both')
        if body.ids is not None and not 1 <= len(body.ids) <= MAX_IDS:
            raise ApiError(422, f"ids: give 1 to {MAX_IDS} job ids")
        client = client_of(request)
        ids = None if body.ids is None else list(dict.fromkeys(body.ids))
        if ids is not None:
            held = set(await client.admin.in_set(which, ids))
            missing = [i for i in ids if i not in held]
            if missing:
                raise ApiError(404, f"not among the {which} jobs: {', '.join(missing[:10])}")
            request.state.audit_ids = ids
        if action == "retry":
            n = request.state.audit_count = await client.admin.retry(which, ids)
            return JSONResponse(b.Retried(n))
        n = request.state.audit_count = await client.admin.delete(which, ids)
        return JSONResponse(b.Deleted(n))

    act.__name__ = f"api_{which}_{action}"
    act.__doc__ = f"{action.capitalize()} {which} jobs: some ids, or all."
    answer = b.Retried if action == "retry" else b.Deleted
    return documented(f"{which}_{action}", answer, 400, 404, 415, 422, request=Ids)(act)


@documented("abort", b.Aborted, 404)
async def abort(request: Request) -> Response:
    """Abort a job."""
    job_id = request.path_params["job_id"]
    was = await client_of(request).abort(job_id)
    if was == "missing":  # the script says so: no read before it
        raise ApiError(404, f"no job {job_id!r}")
    return JSONResponse(b.Aborted(job_id, was))


def _run_at(body: EnqueueRequest) -> float | None:
    if body.delay is not None and body.run_at is not None:
        raise ApiError(422, 'give "delay" or "run_at", not both')
    if body.delay is not None:
        if not (math.isfinite(body.delay) and 0 <= body.delay <= MAX_DELAY):
            raise ApiError(422, f"delay: seconds from 0 to {MAX_DELAY:.0f}")
        return time.time() + body.delay
    if isinstance(body.run_at, str):
        try:
            return _epoch(moment_seconds("run_at", body.run_at))
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
    if body.run_at is not None:
        return _epoch(body.run_at)
    return None


def _epoch(value: float) -> float:
    try:
        return epoch_seconds("run_at", value)  # the client's rule, and its words
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None


@documented(
    "enqueue",
    b.Enqueued,
    400,
    413,
    415,
    422,
    request=EnqueueRequest,
    answers={
        "201": json_answer(b.Enqueued, "enqueued"),
        "200": json_answer(b.Enqueued, "nothing new: the unique key is held"),
    },
)
async def enqueue(request: Request) -> Response:
    """Enqueue a job."""
    body: EnqueueRequest = await _body(request, EnqueueRequest)
    if body.args is not None and body.kwargs is not None:
        raise ApiError(422, 'give "args" or "kwargs", not both')
    if body.max_fails is not None and not 1 <= body.max_fails <= MAX_FAILS:
        raise ApiError(422, f"max_fails: from 1 to {MAX_FAILS}")
    if body.timeout is not None and not (
        math.isfinite(body.timeout) and MIN_TIMEOUT <= body.timeout <= MAX_DELAY
    ):
        raise ApiError(422, f"timeout: seconds from {MIN_TIMEOUT} to {MAX_DELAY:.0f}")
    if body.unique is not None and not 1 <= len(body.unique) <= MAX_UNIQUE:
        raise ApiError(422, f"unique: 1 to {MAX_UNIQUE} characters")
    if body.after is not None and len(body.after) > MAX_IDS:
        raise ApiError(422, f"after: at most {MAX_IDS} job ids")
    spec_ = JobSpec(
        name=body.name,
        args=tuple(body.args or ()),
        kwargs=body.kwargs or {},
        run_at=_run_at(body),
        unique=body.unique,
        job_id=body.job_id,
        max_fails=body.max_fails,
        timeout=body.timeout,
        after=tuple(body.after or ()),
    )
    try:
        (job_,) = await client_of(request).enqueue_many([spec_])
    except PayloadTooLarge as exc:
        raise ApiError(413, str(exc)) from None
    except JobNotFound as exc:  # a parent that does not exist: nothing was written
        raise ApiError(422, str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise ApiError(422, str(exc)) from None
    status = 201 if job_.created else 200
    return JSONResponse(job_, status)
