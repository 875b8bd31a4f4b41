"""The HTML pages and the form actions behind their buttons.

Each page renders what its JSON twin under ``/api/`` returns, as the plain values its
JSON carries. Actions answer with a 303 redirect back to the page they came from.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rota.operations import SEARCH_LIMIT
from rota.protocol.job import validate_name
from rota.web import views
from rota.web.base import NS_COOKIE, client_of, local_path, render, state_of, with_notice
from rota.web.charts import bar_chart
from rota.web.graph import STATES, layout
from rota.web.request_bodies import MAX_LIMIT
from rota.web.security import READ, SESSION_COOKIE

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


async def pools(request: Request) -> Response:
    data = _plain(await views.pools(client_of(request), state_of(request).settings))
    return render(request, "pools.html", {"data": data, "api": "/api/pools", "refresh": REFRESH})


async def cron(request: Request) -> Response:
    data = _plain(await views.cron(client_of(request), state_of(request).settings))
    return render(request, "cron.html", {"data": data, "api": "/api/cron", "refresh": REFRESH})


async def busy(request: Request) -> Response:
    data = _plain(await views.busy(client_of(request)))
    return render(request, "busy.html", {"data": data, "api": "/api/busy", "refresh": REFRESH})


def _clamped(request: Request, name: str, default: int, hi: int) -> int:
    try:
        return max(0, min(hi, int(request.query_params.get(name, default))))
    except ValueError:
        return default


def job_set_page(which: views.JobSet) -> Any:
    async def page(request: Request) -> Response:
        offset = _clamped(request, "offset", 0, 10**9)
        q = request.query_params.get("q", "")[:200]
        data = _plain(await views.job_page(client_of(request), which, offset, PER_PAGE, q))
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
    found = await views.job_detail(client_of(request), job_id)
    if found is None:
        raise HTTPException(404, f"no job {job_id}")
    data = _plain(found)
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
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["state"]] = counts.get(n["state"], 0) + 1
    order = {s: i for i, s in enumerate(STATES)}
    return sorted(counts.items(), key=lambda c: (order.get(c[0], len(order)), c[0]))


def _settled(nodes: list[dict[str, Any]]) -> bool:
    return all(n["state"] in views.FINAL_STATES for n in nodes)


async def flow(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    found = await views.flow(client_of(request), job_id)
    if found is None:
        raise HTTPException(404, f"no job {job_id}")
    data = _plain(found)
    context = {
        "data": data,
        "g": layout(data["nodes"], data["edges"], focus=job_id),
        "counts": _counts(data["nodes"]),
        "api": f"/api/flows/{job_id}",
        "refresh": 0 if _settled(data["nodes"]) else REFRESH,
    }
    return render(request, "flow.html", context)


async def group(request: Request) -> Response:
    group_id = request.path_params["group_id"]
    offset = _clamped(request, "offset", 0, 10**9)
    found = await views.group_detail(client_of(request), group_id, offset, PER_PAGE)
    if found is None:
        raise HTTPException(404, f"no group {group_id} (never enqueued, or expired)")
    data = _plain(found)
    nodes = list(data["members"])
    edges = []
    if data["then"] is not None:
        nodes.append(data["then"])
        edges = [{"from": m["id"], "to": data["then"]["id"], "kind": "group"} for m in nodes[:-1]]
    total = max(1, data["total"])
    done = round(1000 * data["done"] / total, 1)
    context = {
        "data": data,
        "g": layout(nodes, edges),
        "bar": {"done": done, "failed": round(1000 * data["failed"] / total, 1)},
        "api": f"/api/groups/{group_id}" + (f"?offset={offset}" if offset else ""),
        "refresh": 0 if data["finished"] and _settled(nodes) else REFRESH,
        "prev_offset": max(0, offset - PER_PAGE) if offset > 0 else None,
        "next_offset": offset + PER_PAGE if offset + PER_PAGE < data["total"] else None,
    }
    return render(request, "group.html", context)


async def redis_page(request: Request) -> Response:
    data = _plain(await views.redis_info(client_of(request)))
    return render(request, "redis.html", {"data": data, "api": "/api/redis", "refresh": REFRESH})


# -- actions ---------------------------------------------------------------------


async def _next(request: Request, default: str) -> str:
    form = await request.form()
    value = form.get("next")
    return local_path(value if isinstance(value, str) else None, default)


async def switch_namespace(request: Request) -> Response:
    """Look at another of the namespaces this UI shows (remembered in a cookie)."""
    name = request.path_params["name"]
    if name not in state_of(request).clients:
        raise HTTPException(404, f"namespace {name} is not shown here")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(NS_COOKIE, name, httponly=True, samesite="strict", path="/")
    return response


async def queue_action(request: Request) -> Response:
    name, action = request.path_params["name"], request.path_params["action"]
    client = client_of(request)
    try:
        validate_name(name)
    except ValueError:
        raise HTTPException(404, f"no queue {name}") from None
    actions = ("pause", "resume", "clear", "rate", "limit")
    if name not in await client.names() or action not in actions:
        raise HTTPException(404, f"no queue {name}")
    target = await _next(request, "/queues")
    n = None
    if action in ("rate", "limit"):
        value = (await request.form()).get(action)
        text = value.strip() if isinstance(value, str) else ""
        try:
            if action == "rate":
                await client.set_rate(name, text or None)
            else:
                await client.set_limit(name, _limit(text))
        except ValueError as exc:
            return await queues(request, error=f"{name}: {exc}")
        done = f"{action}-set" if text else f"{action}-removed"
        return RedirectResponse(with_notice(target, done), 303)
    if action == "pause":
        await client.pause(name)
    elif action == "resume":
        await client.resume(name)
    else:
        n = await client.clear_queue(name)
    done = {"pause": "paused", "resume": "resumed", "clear": "cleared"}[action]
    return RedirectResponse(with_notice(target, done, n), status_code=303)


def _limit(text: str) -> int | None:
    """A concurrency limit typed in the form: a whole number from 1, or nothing."""
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise ValueError(f"the limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}")
    return int(text)


def set_action(which: views.JobSet) -> Any:
    async def act(request: Request) -> Response:
        job_id, action = request.path_params["job_id"], request.path_params["action"]
        client = client_of(request)
        actions = ("retry", "delete") if which in views.RETRYABLE else ("delete",)
        if action not in actions or await views.missing_from_set(client, which, [job_id]):
            raise HTTPException(404, f"no job {job_id} among the {which} jobs")
        target = await _next(request, f"/{which}")
        if target.startswith(f"/jobs/{job_id}") and action == "delete":
            target = f"/{which}"
        if action == "retry":
            n = await client.retry(which, [job_id])
        else:
            n = await client.delete(which, [job_id])
        return RedirectResponse(
            with_notice(target, "retried" if action == "retry" else "deleted", n), 303
        )

    act.__name__ = f"{which}_action"
    return act


def set_all_action(which: views.JobSet, action: str) -> Any:
    """Retry or delete every job of a set, or, when the form carries the page's search
    (``q``), only the jobs that match it: a bulk button under a search acts on what the
    operator sees listed, never on the whole set."""

    async def act(request: Request) -> Response:
        client = client_of(request)
        target = await _next(request, f"/{which}")
        q = (await request.form()).get("q")
        ids: list[str] | None = None
        if isinstance(q, str) and q.strip():
            found = await client.search(which, q, 0, SEARCH_LIMIT)
            ids = [j.id for j in found.jobs]
        if ids == []:
            n = 0
        elif action == "retry":
            n = await client.retry(which, ids)
        else:
            n = await client.delete(which, ids)
        done = "retried" if action == "retry" else "deleted"
        return RedirectResponse(with_notice(target, done, n), status_code=303)

    act.__name__ = f"{which}_{action}_all"
    return act


async def abort(request: Request) -> Response:
    job_id = request.path_params["job_id"]
    client = client_of(request)
    if await client.job(job_id) is None:
        raise HTTPException(404, f"no job {job_id}")
    await client.abort(job_id)
    return RedirectResponse(with_notice(f"/jobs/{job_id}", "aborted"), status_code=303)


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
        Route("/queues/{name}/{action}", queue_action, methods=["POST"]),
        Route("/pools", pools),
        Route("/cron", cron),
        Route("/busy", busy),
        Route("/jobs/{job_id}", job),
        Route("/jobs/{job_id}/abort", abort, methods=["POST"]),
        Route("/flows/{job_id}", flow),
        Route("/groups/{group_id}", group),
        Route("/redis", redis_page),
        Route("/audit", audit),
        Route("/ns/{name}", switch_namespace),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
    for which in views.JOB_SETS:
        out.append(Route(f"/{which}", job_set_page(which)))
        if which in views.RETRYABLE:  # a waiting job runs when its parents complete
            out.append(
                Route(f"/{which}/retry-all", set_all_action(which, "retry"), methods=["POST"])
            )
        out += [
            Route(f"/{which}/delete-all", set_all_action(which, "delete"), methods=["POST"]),
            Route(f"/{which}/{{job_id}}/{{action}}", set_action(which), methods=["POST"]),
        ]
    return out


routes = _routes()
