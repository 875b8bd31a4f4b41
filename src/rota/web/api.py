"""The JSON API: every page's data, the same actions, and enqueueing.

Errors are ``{"error": "..."}`` with a 4xx status, and a refused request changes
nothing: ids are checked before anything is done. A Redis that cannot be reached or
refuses for now (out of memory, a read-only replica...) is a 503 whose error says which
(see ``app.py``). ``openapi.py`` describes it all.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.client import JobSpec
from rota.errors import JobNotFound, PayloadTooLarge
from rota.protocol import codec
from rota.protocol.job import validate_name
from rota.spec import epoch_seconds
from rota.web import bodies as b
from rota.web import cron_switch, views
from rota.web.base import ApiError, JSONResponse, client_of, int_param, state_of
from rota.web.name_stats import MINUTES, name_stats
from rota.web.openapi import spec
from rota.web.request_bodies import (
    MAX_DELAY,
    MAX_FAILS,
    MAX_IDS,
    MAX_LIMIT,
    MAX_UNIQUE,
    EnqueueRequest,
    Ids,
    LimitRequest,
    RateRequest,
)

__all__ = ["routes"]


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


def _queue_name(request: Request) -> str:
    name: str = request.path_params["name"]
    try:
        return validate_name(name)
    except ValueError:
        raise ApiError(404, f"no queue {name!r}") from None


async def _known_queue(request: Request) -> str:
    name = _queue_name(request)
    if name not in await client_of(request).names():
        raise ApiError(404, f"no queue {name!r}")
    return name


# -- reading ---------------------------------------------------------------------


async def dashboard(request: Request) -> Response:
    minutes = int_param(request, "minutes", 60, 1, 120)
    days = int_param(request, "days", 30, 1, 90)
    return JSONResponse(await views.dashboard(client_of(request), minutes, days))


async def queues(request: Request) -> Response:
    offset = int_param(request, "offset", 0, 0, 10**9)
    limit = int_param(request, "limit", 100, 1, 1000)
    return JSONResponse(await views.queues(client_of(request), offset, limit))


async def queue_jobs(request: Request) -> Response:
    name = await _known_queue(request)
    offset = int_param(request, "offset", 0, 0, 10**9)
    limit = int_param(request, "limit", 25, 1, 500)
    order = request.query_params.get("order", "oldest")
    if order not in ("oldest", "newest"):
        raise ApiError(400, "order: oldest or newest")
    data = await views.queue_jobs(client_of(request), name, offset, limit, order == "newest")
    return JSONResponse(data)


async def queue_stats(request: Request) -> Response:
    name = await _known_queue(request)
    minutes = int_param(request, "minutes", MINUTES, 1, 120)
    return JSONResponse(await name_stats(client_of(request), name, minutes))


async def pools(request: Request) -> Response:
    return JSONResponse(await views.pools(client_of(request), state_of(request).settings))


async def cron(request: Request) -> Response:
    return JSONResponse(await cron_switch.cron(client_of(request), state_of(request).settings))


async def busy(request: Request) -> Response:
    return JSONResponse(await views.busy(client_of(request)))


def job_set(which: views.JobSet) -> Any:
    async def read(request: Request) -> Response:
        offset = int_param(request, "offset", 0, 0, 10**9)
        limit = int_param(request, "limit", 25, 1, 500)
        q = request.query_params.get("q", "")
        if len(q) > 200:
            raise ApiError(400, "q: at most 200 characters")
        return JSONResponse(await views.job_page(client_of(request), which, offset, limit, q))

    read.__name__ = f"api_{which}"
    return read


async def job(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    data = await views.job_detail(client_of(request), job_id)
    if data is None:
        raise ApiError(404, f"no job {job_id!r}")
    return JSONResponse(data)


def stored_value(field: Literal["args", "result"]) -> Callable[[Request], Awaitable[Response]]:
    """A job's args or result as stored (the JSON text), whole: what a job page links
    to when it shows only the start of a large value."""

    async def read(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        text = await client_of(request).stored(job_id, field)
        if text is None:
            raise ApiError(404, f"no job {job_id!r}")
        return Response(text or b"null", media_type="application/json")

    return read


async def audit(request: Request) -> Response:
    offset = int_param(request, "offset", 0, 0, 10**6)
    limit = int_param(request, "limit", 100, 1, 1000)
    total, entries = await state_of(request).audit.recent(offset, limit)
    return JSONResponse({"total": total, "offset": offset, "entries": entries})


async def group(request: Request) -> Response:
    group_id = request.path_params["group_id"]
    offset = int_param(request, "offset", 0, 0, 10**9)
    limit = int_param(request, "limit", 100, 1, 1000)
    data = await views.group_detail(client_of(request), group_id, offset, limit)
    if data is None:
        raise ApiError(404, f"no group {group_id!r} (never enqueued, or expired)")
    return JSONResponse(data)


async def flow(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    data = await views.flow(client_of(request), job_id)
    if data is None:
        raise ApiError(404, f"no job {job_id!r}")
    return JSONResponse(data)


async def redis_info(request: Request) -> Response:
    return JSONResponse(await views.redis_info(client_of(request)))


async def openapi(request: Request) -> Response:
    return JSONResponse(spec())


# -- actions ---------------------------------------------------------------------


async def pause(request: Request) -> Response:
    name = await _known_queue(request)
    await client_of(request).pause(name)
    return JSONResponse(b.QueueState(name, paused=True))


async def resume(request: Request) -> Response:
    name = await _known_queue(request)
    await client_of(request).resume(name)
    return JSONResponse(b.QueueState(name, paused=False))


async def set_rate(request: Request) -> Response:
    name = await _known_queue(request)
    body: RateRequest = await _body(request, RateRequest)
    try:
        await client_of(request).set_rate(name, body.rate)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    (info,) = await client_of(request).queues([name])
    return JSONResponse(b.QueueRate(name, info.rate))


async def set_limit(request: Request) -> Response:
    name = await _known_queue(request)
    body: LimitRequest = await _body(request, LimitRequest)
    if body.limit is not None and not 1 <= body.limit <= MAX_LIMIT:
        raise ApiError(422, f"limit: give 1 to {MAX_LIMIT} jobs at once, or null for no limit")
    await client_of(request).set_limit(name, body.limit)
    return JSONResponse(b.QueueLimit(name, body.limit))


async def clear(request: Request) -> Response:
    name = await _known_queue(request)
    return JSONResponse(b.Cleared(name, await client_of(request).clear_queue(name)))


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
            missing = await views.missing_from_set(client, which, ids)
            if missing:
                raise ApiError(404, f"not among the {which} jobs: {', '.join(missing[:10])}")
            request.state.audit_ids = ids
        if action == "retry":
            return JSONResponse(b.Retried(await client.retry(which, ids)))
        return JSONResponse(b.Deleted(await client.delete(which, ids)))

    act.__name__ = f"api_{which}_{action}"
    return act


async def abort(request: Request) -> Response:
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
            moment = datetime.fromisoformat(body.run_at)
        except ValueError:
            raise ApiError(422, "run_at: not an ISO-8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return _epoch(moment.timestamp())
    if body.run_at is not None:
        return _epoch(body.run_at)
    return None


def _epoch(value: float) -> float:
    try:
        return epoch_seconds("run_at", value)  # the client's rule, and its words
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None


async def enqueue(request: Request) -> Response:
    body: EnqueueRequest = await _body(request, EnqueueRequest)
    if body.args is not None and body.kwargs is not None:
        raise ApiError(422, 'give "args" or "kwargs", not both')
    if body.max_fails is not None and not 1 <= body.max_fails <= MAX_FAILS:
        raise ApiError(422, f"max_fails: from 1 to {MAX_FAILS}")
    if body.timeout is not None and not (
        math.isfinite(body.timeout) and 0 < body.timeout <= MAX_DELAY
    ):
        raise ApiError(422, "timeout: seconds, more than 0")
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


def _routes() -> list[BaseRoute]:
    out: list[BaseRoute] = [
        Route("/api/openapi.json", openapi),
        Route("/api/dashboard", dashboard),
        Route("/api/queues", queues),
        Route("/api/queues/{name}/jobs", queue_jobs),
        Route("/api/queues/{name}/stats", queue_stats),
        Route("/api/queues/{name}/pause", pause, methods=["POST"]),
        Route("/api/queues/{name}/resume", resume, methods=["POST"]),
        Route("/api/queues/{name}/clear", clear, methods=["POST"]),
        Route("/api/queues/{name}/rate", set_rate, methods=["POST"]),
        Route("/api/queues/{name}/limit", set_limit, methods=["POST"]),
        Route("/api/pools", pools),
        Route("/api/cron", cron),
        Route("/api/busy", busy),
        Route("/api/jobs", enqueue, methods=["POST"]),
        Route("/api/jobs/{job_id}", job),
        Route("/api/jobs/{job_id}/abort", abort, methods=["POST"]),
        Route("/api/jobs/{job_id}/args", stored_value("args")),
        Route("/api/jobs/{job_id}/result", stored_value("result")),
        Route("/api/groups/{group_id}", group),
        Route("/api/flows/{job_id}", flow),
        Route("/api/redis", redis_info),
        Route("/api/audit", audit),
    ]
    for which in views.JOB_SETS:
        out.append(Route(f"/api/{which}", job_set(which)))
        if which in views.RETRYABLE:  # a waiting job runs when its parents complete
            out.append(Route(f"/api/{which}/retry", set_action(which, "retry"), methods=["POST"]))
        out.append(Route(f"/api/{which}/delete", set_action(which, "delete"), methods=["POST"]))
    return out


routes = _routes()
