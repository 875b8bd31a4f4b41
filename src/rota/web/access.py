"""Who comes in and what they did: the login form, logout, the namespace a browser looks
at, and the audit log of the changes made through the UI and the API."""

from __future__ import annotations

import math
from typing import Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rota.web.base import NS_COOKIE, local_path, render, state_of
from rota.web.declare import Number, Routes, is_api, pages
from rota.web.middleware.auth import READ, SESSION_COOKIE

__all__ = ["routes"]

routes = Routes()
_OFFSET: Final = Number("offset", 0, 0, 10**6)
_LIMIT: Final = Number("limit", 100, 1, 1000, page=100)


@routes.form("/audit", "GET")
@routes.api("/api/audit", "audit", None, params=(_OFFSET, _LIMIT))
async def audit(request: Request) -> Response | dict[str, object]:
    """The changes made through the web UI and the API, newest first."""
    offset, limit = _OFFSET.read(request), _LIMIT.read(request)
    total, entries = await state_of(request).audit.recent(offset, limit)
    if is_api(request):
        return {"total": total, "offset": offset, "entries": entries}
    context = {"entries": entries, "total": total, "offset": offset}
    return render(request, "audit.html", {**context, **pages(offset, limit, total)})


@routes.form("/ns/{name}", "GET")
async def switch_namespace(request: Request) -> Response:
    """Look at another of the namespaces this UI shows (remembered in a cookie)."""
    name = request.path_params["name"]
    if name not in state_of(request).clients:
        raise HTTPException(404, f"namespace {name} is not shown here")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(NS_COOKIE, name, httponly=True, samesite="strict", path="/")
    return response


@routes.form("/login", "GET", "POST")
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
        return render(request, "login.html", {"next": target, "error": "Wrong token."}, status=401)
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


@routes.form("/logout")
async def logout(request: Request) -> Response:
    """End the session on the server, not only the browser's cookie: the old value no
    longer opens anything (see :mod:`rota.web.sessions`)."""
    sessions = state_of(request).sessions
    if sessions is not None:
        await sessions.end(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
    return response
