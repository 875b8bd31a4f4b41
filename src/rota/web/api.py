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
from typing import Any, Final, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.client import JobSpec
from rota.errors import JobNotFound, PayloadTooLarge
from rota.inspect.figures import MINUTES
from rota.inspect.members import MEMBER_STATES, member_state
from rota.protocol import codec
from rota.spec import epoch_seconds, moment_seconds
from rota.web import bodies as b
from rota.web import cron_switch, views
from rota.web.base import ApiError, JSONResponse, client_of, found, known_queue, state_of
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
from rota.web.schemas import STR, Number, documented, json_answer, query

__all__ = ["routes"]

_OFFSET: Final = Number("offset", 0, 0, 10**9)
_LIMIT: Final = Number("limit", 100, 1, 1000)
_LIMIT_25: Final = Number("limit", 25, 1, 500)
_MINUTES: Final = Number("minutes", MINUTES, 1, 120)
_DAYS: Final = Number("days", 30, 1, 90)
_AUDIT_OFFSET: Final = Number("offset", 0, 0, 10**6)


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


# -- reading ---------------------------------------------------------------------


@documented(
    "dashboard",
    b.Dashboard,
    400,
    parameters=(_MINUTES, _DAYS),
)
async def dashboard(request: Request) -> Response:
    """Totals, sizes, and processed/failed per minute and per day."""
    minutes, days = _MINUTES.read(request), _DAYS.read(request)
    return JSONResponse(await views.dashboard(client_of(request), minutes, days))


@documented("queues", b.Queues, 400, parameters=(_OFFSET, _LIMIT))
async def queues(request: Request) -> Response:
    """A page of the queues' figures, the busiest first."""
    offset, limit = _OFFSET.read(request), _LIMIT.read(request)
    return JSONResponse(await views.queues(client_of(request), offset, limit))


@documented(
    "queue_jobs",
    b.QueueJobs,
    400,
    404,
    parameters=(
        _OFFSET,
        _LIMIT_25,
        query("order", {**STR, "enum": ["oldest", "newest"]}, "default oldest"),
    ),
)
async def queue_jobs(request: Request) -> Response:
    """A page of the jobs waiting in a queue, the next to run first (or the newest)."""
    name = await known_queue(request)
    offset, limit = _OFFSET.read(request), _LIMIT_25.read(request)
    order = request.query_params.get("order", "oldest")
    if order not in ("oldest", "newest"):
        raise ApiError(400, "order: oldest or newest")
    data = await views.queue_jobs(client_of(request), name, offset, limit, order == "newest")
    return JSONResponse(data)


@documented(
    "queue_stats",
    b.NameStats,
    400,
    404,
    parameters=(_MINUTES,),
)
async def queue_stats(request: Request) -> Response:
    """A job name per UTC minute: processed, failed, mean run time."""
    name = await known_queue(request)
    return JSONResponse(await views.name_stats(client_of(request), name, _MINUTES.read(request)))


@documented("pools", b.Pools)
async def pools(request: Request) -> Response:
    """Live pools and their heartbeats."""
    return JSONResponse(await views.pools(client_of(request), state_of(request).settings))


@documented("cron", b.Cron)
async def cron(request: Request) -> Response:
    """Periodic jobs: next and last fire times, and whether each is on."""
    return JSONResponse(await views.cron(client_of(request), state_of(request).settings))


@documented("busy", b.Busy)
async def busy(request: Request) -> Response:
    """Jobs running now, from the running sets."""
    return JSONResponse(await views.busy(client_of(request)))


_SEARCH: Final = query("q", {**STR, "maxLength": 200}, "part of a job id or name")
_FROM: Final = Number("from", 0, 0, 10**9, "where in the set a search begins")


def job_set(which: views.JobSet) -> Any:
    async def read(request: Request) -> Response:
        offset, limit = _OFFSET.read(request), _LIMIT_25.read(request)
        q = request.query_params.get("q", "")
        if len(q) > 200:
            raise ApiError(400, "q: at most 200 characters")
        start = _FROM.read(request)
        page = await views.job_page(client_of(request), which, offset, limit, q, start)
        return JSONResponse(page)

    read.__name__ = f"api_{which}"
    read.__doc__ = f"A page of the {which} jobs, searchable by id and name."
    paging = (_OFFSET, _LIMIT_25, _SEARCH, _FROM)
    return documented(f"list_{which}", b.JobPage, 400, parameters=paging)(read)


@documented("job", "Job", 404)
async def job(request: Request) -> Response:
    """Everything about one job."""
    job_id = request.path_params["job_id"]
    return JSONResponse(
        found(await views.job_detail(client_of(request), job_id), f"no job {job_id!r}")
    )


def stored_value(field: Literal["args", "result"]) -> Callable[[Request], Awaitable[Response]]:
    """A job's args or result as stored (the JSON text), whole: what a job page links
    to when it shows only the start of a large value."""

    async def read(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        text = found(await client_of(request).stored(job_id, field), f"no job {job_id!r}")
        return Response(text or b"null", media_type="application/json")

    read.__doc__ = f"A job's {field} as stored (JSON text)."
    return documented(field, None, 404)(read)


@documented("audit", None, 400, parameters=(_AUDIT_OFFSET, _LIMIT))
async def audit(request: Request) -> Response:
    """The changes made through the web UI and the API, newest first."""
    offset, limit = _AUDIT_OFFSET.read(request), _LIMIT.read(request)
    total, entries = await state_of(request).audit.recent(offset, limit)
    return JSONResponse({"total": total, "offset": offset, "entries": entries})


_MEMBERS = query(
    "state", {"enum": ["all", *MEMBER_STATES]}, "keep the members in this state (default all)"
)


@documented("group", b.Group, 400, 404, parameters=(_OFFSET, _LIMIT, _MEMBERS))
async def group(request: Request) -> Response:
    """A group's progress, its callback, and a page of its members (those in a state)."""
    group_id = request.path_params["group_id"]
    offset, limit = _OFFSET.read(request), _LIMIT.read(request)
    text = request.query_params.get("state", "all")
    state = member_state(text)
    if state is None and text != "all":
        raise ApiError(400, f"state: one of all, {', '.join(MEMBER_STATES)}")
    data = await views.group_detail(client_of(request), group_id, offset, limit, state)
    return JSONResponse(found(data, f"no group {group_id!r} (never enqueued, or expired)"))


@documented("flow", b.Flow, 404)
async def flow(request: Request) -> Response:
    """The graph of the workflow a job belongs to (at most 200 jobs)."""
    job_id = request.path_params["job_id"]
    return JSONResponse(found(await views.flow(client_of(request), job_id), f"no job {job_id!r}"))


@documented("redis", b.Redis)
async def redis_info(request: Request) -> Response:
    """Redis server figures and round trip."""
    return JSONResponse(await views.redis_info(client_of(request)))


@documented("shards", b.Shards)
async def shards(request: Request) -> Response:
    """Each shard of the namespace: its tag, slot, server and the jobs it holds."""
    return JSONResponse(await views.shards(client_of(request)))


# -- actions ---------------------------------------------------------------------


@documented("queue_pause", b.QueueState, 404)
async def pause(request: Request) -> Response:
    """Pause a queue."""
    name = await known_queue(request)
    await client_of(request).pause(name)
    return JSONResponse(b.QueueState(name, paused=True))


@documented("queue_resume", b.QueueState, 404)
async def resume(request: Request) -> Response:
    """Resume a queue."""
    name = await known_queue(request)
    await client_of(request).resume(name)
    return JSONResponse(b.QueueState(name, paused=False))


@documented("queue_rate", b.QueueRate, 400, 404, 415, 422, request=RateRequest)
async def set_rate(request: Request) -> Response:
    """Set or remove the rate limit of a queue (across all pools)."""
    name = await known_queue(request)
    body: RateRequest = await _body(request, RateRequest)
    try:
        await client_of(request).set_rate(name, body.rate)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    (info,) = await client_of(request).queues([name])
    return JSONResponse(b.QueueRate(name, info.rate))


@documented("queue_limit", b.QueueLimit, 400, 404, 415, 422, request=LimitRequest)
async def set_limit(request: Request) -> Response:
    """Set or remove the concurrency limit of a queue (across all pools)."""
    name = await known_queue(request)
    body: LimitRequest = await _body(request, LimitRequest)
    if body.limit is not None and not 1 <= body.limit <= MAX_LIMIT:
        raise ApiError(422, f"limit: give 1 to {MAX_LIMIT} jobs at once, or null for no limit")
    await client_of(request).set_limit(name, body.limit)
    return JSONResponse(b.QueueLimit(name, body.limit))


@documented("queue_clear", b.Cleared, 404)
async def clear(request: Request) -> Response:
    """Clear a queue."""
    name = await known_queue(request)
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
            held = set(await client.in_set(which, ids))
            missing = [i for i in ids if i not in held]
            if missing:
                raise ApiError(404, f"not among the {which} jobs: {', '.join(missing[:10])}")
            request.state.audit_ids = ids
        if action == "retry":
            return JSONResponse(b.Retried(await client.retry(which, ids)))
        return JSONResponse(b.Deleted(await client.delete(which, ids)))

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
        Route("/api/shards", shards),
        Route("/api/audit", audit),
    ]
    for which in views.JOB_SETS:
        out.append(Route(f"/api/{which}", job_set(which)))
        if which in views.RETRYABLE:  # a waiting job runs when its parents complete
            out.append(Route(f"/api/{which}/retry", set_action(which, "retry"), methods=["POST"]))
        out.append(Route(f"/api/{which}/delete", set_action(which, "delete"), methods=["POST"]))
    return [*out, *cron_switch.api_routes]


routes = _routes()
