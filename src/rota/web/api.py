"""The JSON API: every page's data here, the same actions and enqueueing in
:mod:`rota.web.api_writes`, and the routes of both.

Errors are ``{"error": "..."}`` with a 4xx status, and a refused request changes
nothing: ids are checked before anything is done. A Redis that cannot be reached or
refuses for now (out of memory, a read-only replica...) is a 503 whose error says which
(see ``app.py``). ``openapi.py`` describes it all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rota.inspect.figures import MINUTES
from rota.inspect.members import MEMBER_STATES, member_state
from rota.web import bodies as b
from rota.web import cron_switch, views
from rota.web.api_writes import (
    abort,
    clear,
    enqueue,
    pause,
    resume,
    set_action,
    set_limit,
    set_rate,
)
from rota.web.base import ApiError, JSONResponse, client_of, found, known_queue, state_of
from rota.web.schemas import STR, Number, documented, query

__all__ = ["routes"]

_OFFSET: Final = Number("offset", 0, 0, 10**9)
_LIMIT: Final = Number("limit", 100, 1, 1000)
_LIMIT_25: Final = Number("limit", 25, 1, 500)
_MINUTES: Final = Number("minutes", MINUTES, 1, 120)
_DAYS: Final = Number("days", 30, 1, 90)
_AUDIT_OFFSET: Final = Number("offset", 0, 0, 10**6)


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
        text = found(await client_of(request).admin.stored(job_id, field), f"no job {job_id!r}")
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
