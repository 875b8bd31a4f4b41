"""The HTML pages and the form actions behind their buttons.

Each page renders what its JSON twin under ``/api/`` returns, as the plain values its
JSON carries. Actions answer with a 303 redirect back to the page they came from.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import quote

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rota.inspect import FINAL_STATES, MISSING
from rota.inspect.members import MEMBER_STATES, member_state
from rota.web import views
from rota.web.base import NS_COOKIE, client_of, found, known_queue, local_path, render, state_of
from rota.web.charts import bar_chart, duration_chart
from rota.web.graph import STATES, layout
from rota.web.middleware.auth import READ, SESSION_COOKIE

__all__ = ["routes"]

REFRESH = 5  # seconds between refreshes of a page's figures
PER_PAGE = 25
#: Job names per page of /queues: a page stays small with thousands of names.
QUEUES_PER_PAGE = 100
#: Entries per page of /audit.
AUDIT_PER_PAGE = 100


def _plain(body: object) -> dict[str, Any]:
    """A body of :mod:`rota.web.bodies` as its JSON carries it (dicts, lists, text)."""
    data: dict[str, Any] = msgspec.to_builtins(body)
    return data


async def dashboard(request: Request) -> Response:
    data = _plain(await views.dashboard(client_of(request)))
    charts = {
        "minutes": bar_chart(data["minutes"], "minute"),
        "days": bar_chart(data["days"], "day"),
    }
    return render(
        request,
        "dashboard.html",
        {"data": data, "charts": charts, "api": "/api/dashboard", "refresh": REFRESH},
    )


async def queues(request: Request, error: str | None = None) -> Response:
    """A page of the queues, the busiest first; ``error``: what was wrong with a form
    sent from it (a rate or a limit that does not parse), shown above the table with
    status 400."""
    offset = _clamped(request, "offset", 0, 10**9)
    data = _plain(await views.queues(client_of(request), offset, QUEUES_PER_PAGE))
    context = {
        "data": data,
        "api": f"/api/queues?offset={offset}&limit={QUEUES_PER_PAGE}",
        "refresh": REFRESH,
        "error": error,
        "prev_offset": max(0, offset - QUEUES_PER_PAGE) if offset > 0 else None,
        "next_offset": offset + QUEUES_PER_PAGE
        if offset + QUEUES_PER_PAGE < data["total"]
        else None,
    }
    return render(request, "queues.html", context, status=400 if error else 200)


async def queue(request: Request) -> Response:
    """The jobs waiting in one queue, a page at a time, the next to run first (or the
    newest first: ``?order=newest``)."""
    name = await known_queue(request)
    client = client_of(request)
    offset = _clamped(request, "offset", 0, 10**9)
    newest = request.query_params.get("order") == "newest"
    data = _plain(await views.queue_jobs(client, name, offset, PER_PAGE, newest))
    minutes = _plain(await views.name_stats(client, name))["minutes"]
    query = request.url.query
    last = max(0, (data["total"] - 1) // PER_PAGE * PER_PAGE)
    context = {
        "data": data,
        "api": f"/api/queues/{quote(name)}/jobs" + (f"?{query}" if query else ""),
        "refresh": REFRESH,
        "prev_offset": max(0, offset - PER_PAGE) if offset > 0 else None,
        "next_offset": offset + PER_PAGE if offset + PER_PAGE < data["total"] else None,
        "last_offset": last if offset < last else None,
        "charts": {"done": bar_chart(minutes, "minute"), "ran": duration_chart(minutes)},
    }
    return render(request, "queue.html", context)


def _view_page(
    name: str, read: Callable[[Request], Awaitable[Any]]
) -> Callable[[Request], Awaitable[Response]]:
    """The page of one view: template ``<name>.html`` shows ``data``, which the browser
    refreshes from ``/api/<name>``."""

    async def page(request: Request) -> Response:
        context = {"data": _plain(await read(request)), "api": f"/api/{name}", "refresh": REFRESH}
        return render(request, f"{name}.html", context)

    page.__name__ = f"{name}_page"
    return page


pools = _view_page("pools", lambda r: views.pools(client_of(r), state_of(r).settings))
cron = _view_page("cron", lambda r: views.cron(client_of(r), state_of(r).settings))
busy = _view_page("busy", lambda r: views.busy(client_of(r)))
redis_page = _view_page("redis", lambda r: views.redis_info(client_of(r)))
shards = _view_page("shards", lambda r: views.shards(client_of(r)))


def _clamped(request: Request, name: str, default: int, hi: int) -> int:
    try:
        return max(0, min(hi, int(request.query_params.get(name, default))))
    except ValueError:
        return default


def job_set_page(which: views.JobSet) -> Any:
    async def page(request: Request) -> Response:
        offset = _clamped(request, "offset", 0, 10**9)
        q = request.query_params.get("q", "")[:200]
        start = _clamped(request, "from", 0, 10**9)
        data = _plain(await views.job_page(client_of(request), which, offset, PER_PAGE, q, start))
        query = request.url.query
        api = f"/api/{which}" + (f"?{query}" if query else "")
        context = {
            "data": data,
            "which": which,
            "column": {"dead": "Died", "waiting": "Enqueued"}.get(which, "Runs at"),
            "api": api,
            "refresh": REFRESH,
            "here": request.url.path + (f"?{query}" if query else ""),
            "prev_offset": max(0, offset - PER_PAGE) if offset > 0 else None,
            "next_offset": offset + PER_PAGE if offset + PER_PAGE < data["total"] else None,
        }
        return render(request, "jobs.html", context)

    page.__name__ = f"{which}_page"
    return page


async def job(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    data = _plain(found(await views.job_detail(client_of(request), job_id), f"no job {job_id}"))
    refresh = REFRESH if data["state"] in ("queued", "running", "waiting") else 0
    context = {
        "job": data,
        "api": f"/api/jobs/{job_id}",
        "refresh": refresh,
        "sets": views.JOB_SETS,
        "retryable": views.RETRYABLE,
    }
    return render(request, "job.html", context)


def _counts(nodes: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """How many jobs are in each state, in the legend's order."""
    counts = Counter(n["state"] for n in nodes)
    order = {s: i for i, s in enumerate(STATES)}
    return sorted(counts.items(), key=lambda c: (order.get(c[0], len(order)), c[0]))


def _settled(nodes: list[dict[str, Any]]) -> bool:
    return all(n["state"] in FINAL_STATES for n in nodes)


async def flow(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    data = _plain(found(await views.flow(client_of(request), job_id), f"no job {job_id}"))
    context = {
        "data": data,
        "g": layout(data["nodes"], data["edges"], focus=job_id),
        "counts": _counts(data["nodes"]),
        "api": f"/api/flows/{job_id}",
        "refresh": 0 if _settled(data["nodes"]) else REFRESH,
    }
    return render(request, "flow.html", context)


#: What the group page says of a callback that will not run, or ran and failed.
_CALLBACK_ENDED: Final = {
    "dead": "the callback is dead",
    "aborted": "the callback was aborted",
    MISSING: "the callback's record is gone",
}


def group_state(data: dict[str, Any]) -> str:
    """The group page's state: how far its members are, then its callback when that
    ended without running to completion (it never says "running" beside a dead or
    aborted callback)."""
    failed, then = data["failed"], data["then"]
    ended = _CALLBACK_ENDED.get(then["state"]) if then is not None else None
    lost = f", {failed} dead or aborted" if failed else ""
    if data["sent"] < data["total"]:
        members = "incomplete: members missing"
    elif data["finished"]:
        members = "finished" + lost
    elif failed or ended:
        members = "members still to run" + (lost + " already" if failed else "")
    else:
        return "running"
    if ended:
        return f"{members}; {ended}" + ("" if data["finished"] else ": it will not run")
    if failed and not data["finished"] and data["sent"] >= data["total"]:
        return members + ": the callback will not run"
    return members


async def group(request: Request) -> Response:
    group_id = request.path_params["group_id"]
    offset = _clamped(request, "offset", 0, 10**9)
    kept = member_state(request.query_params.get("state"))  # None: all
    view = await views.group_detail(client_of(request), group_id, offset, PER_PAGE, kept)
    data = _plain(found(view, f"no group {group_id} (never enqueued, or expired)"))
    nodes = list(data["members"])
    edges = []
    if data["then"] is not None:
        nodes.append(data["then"])
        edges = [{"from": m["id"], "to": data["then"]["id"], "kind": "group"} for m in nodes[:-1]]
    total = max(1, data["total"])
    listed = data["total"] if kept is None else data["matching"]
    done = round(1000 * data["done"] / total, 1)
    context = {
        "data": data,
        "g": layout(nodes, edges),
        "bar": {"done": done, "failed": round(1000 * data["failed"] / total, 1)},
        "state": group_state(data),
        "api": f"/api/groups/{group_id}" + (f"?{request.url.query}" if request.url.query else ""),
        "refresh": 0 if data["finished"] and _settled(nodes) else REFRESH,
        "filters": ["all", *MEMBER_STATES],
        "shown": kept or "all",
        "prev_offset": max(0, offset - PER_PAGE) if offset > 0 else None,
        "next_offset": offset + PER_PAGE if offset + PER_PAGE < listed else None,
    }
    return render(request, "group.html", context)


# -- namespaces ----------------------------------------------------------------


async def switch_namespace(request: Request) -> Response:
    """Look at another of the namespaces this UI shows (remembered in a cookie)."""
    name = request.path_params["name"]
    if name not in state_of(request).clients:
        raise HTTPException(404, f"namespace {name} is not shown here")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(NS_COOKIE, name, httponly=True, samesite="strict", path="/")
    return response


# -- login -----------------------------------------------------------------------


async def audit(request: Request) -> Response:
    """The audit log: who changed what through the UI or the API, newest first."""
    offset = _clamped(request, "offset", 0, 10**6)
    total, entries = await state_of(request).audit.recent(offset, AUDIT_PER_PAGE)
    context = {
        "entries": entries,
        "total": total,
        "offset": offset,
        "prev_offset": max(0, offset - AUDIT_PER_PAGE) if offset > 0 else None,
        "next_offset": offset + AUDIT_PER_PAGE if offset + AUDIT_PER_PAGE < total else None,
    }
    return render(request, "audit.html", context)


async def login(request: Request) -> Response:
    auth = state_of(request).auth
    target = local_path(request.query_params.get("next"), "/")
    if request.method == "GET":
        return render(request, "login.html", {"next": target, "error": None})
    form = await request.form()
    target = local_path(str(form.get("next") or ""), "/")
    token = form.get("token")
    role = auth.token_role(token) if isinstance(token, str) else None
    request.state.login_role = role  # only the admin token clears failed logins
    if role is None:
        context = {"next": target, "error": "Wrong token."}
        return render(request, "login.html", context, status=401)
    sessions = state_of(request).sessions
    assert sessions is not None  # a token is set: token_role passed
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        sessions.issue(readonly=role == READ),
        max_age=math.ceil(sessions.ttl),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    """End the session on the server, not only the browser's cookie: the old value no
    longer opens anything (see :mod:`rota.web.sessions`)."""
    sessions = state_of(request).sessions
    if sessions is not None:
        await sessions.end(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
    return response


def _routes() -> list[BaseRoute]:
    out: list[BaseRoute] = [
        Route("/", dashboard),
        Route("/queues", queues),
        Route("/queues/{name}", queue),
        Route("/pools", pools),
        Route("/cron", cron),
        Route("/busy", busy),
        Route("/jobs/{job_id}", job),
        Route("/flows/{job_id}", flow),
        Route("/groups/{group_id}", group),
        Route("/redis", redis_page),
        Route("/shards", shards),
        Route("/audit", audit),
        Route("/ns/{name}", switch_namespace),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
    out += [Route(f"/{which}", job_set_page(which)) for which in views.JOB_SETS]
    return out


routes = _routes()
