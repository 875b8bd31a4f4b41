"""The Starlette application: the resources' pages and JSON, the OpenAPI document,
metrics, the health check and static files, behind the security middlewares; and how
every error is answered."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rota import inspect
from rota.client import Client
from rota.config import Settings
from rota.errors import RedisRefused, RedisUnavailable, redis_cause
from rota.redis.access import acl_refused
from rota.redis.outage import rota_error
from rota.web import openapi
from rota.web.base import (
    ApiError,
    JSONResponse,
    WebState,
    client_of,
    make_templates,
    render,
    state_of,
)
from rota.web.declare import Error
from rota.web.metrics import metrics
from rota.web.middleware import stack
from rota.web.middleware.auth import Auth
from rota.web.middleware.headers import SECURITY_HEADERS
from rota.web.middleware.limits import authed_limit
from rota.wire.redispy import RedisError

__all__ = ["create_app"]

STATIC = Path(__file__).parent / "static"
_ACL: Final = (
    "Redis refused this to the web UI's user ({}): it runs with a read-only role; the"
    " web-operator role of docs/operations.md may retry, delete and pause"
)


async def healthz(request: Request) -> Response:
    """Open to anyone (a load balancer's probe): it says whether Redis answers, and
    nothing about where Redis is (no address, no error text)."""
    try:
        await inspect.ping(state_of(request).client)
    except (RedisUnavailable, RedisRefused):
        return JSONResponse({"ok": False, "error": "Redis is unavailable"}, status_code=503)
    return JSONResponse({"ok": True})


def _wants_json(request: Request) -> bool:
    path = request.url.path
    if path.startswith(("/api/", "/metrics")) or path == "/healthz":
        return True
    return "text/html" not in request.headers.get("accept", "")


def _error(request: Request, status: int, text: str) -> Response:
    """How the security middlewares say no: JSON for the API, a page for people (the
    login form for a 401 when a token opens the server); the errors of the routes too."""
    auth = state_of(request).auth
    challenge = {"www-authenticate": auth.challenge()} if status == 401 else None
    if _wants_json(request):
        return JSONResponse(Error(text), status_code=status, headers=challenge)
    challenge = challenge if auth.basic else None
    if status == 401 and auth.token:
        query = f"?{request.url.query}" if request.url.query else ""
        context = {"next": request.url.path + query, "error": None}
        return render(request, "login.html", context, status=401, headers=challenge)
    return render(request, "error.html", {"status": status, "message": text}, status, challenge)


async def _http_error(request: Request, exc: Exception) -> Response:
    """An :class:`ApiError` in its words; an ``HTTPException`` in its detail, else in
    a word for its status (Starlette's default detail is the status's phrase)."""
    if isinstance(exc, ApiError):
        return _error(request, exc.status, exc.message)
    assert isinstance(exc, HTTPException)
    try:
        phrase = HTTPStatus(exc.status_code).phrase
    except ValueError:
        phrase = ""
    detail = exc.detail if exc.detail and exc.detail != phrase else None
    said = {404: "not found", 405: "method not allowed"}.get(exc.status_code, "error")
    response = _error(request, exc.status_code, detail or said)
    response.headers.update(exc.headers or {})
    return response


async def _redis_trouble(request: Request, exc: Exception) -> Response:
    """503 for a Redis that cannot be reached or says "not now" (out of memory, a
    read-only replica, loading...), 403 for a command its ACL user may not run; any
    other error reply is a bug: a 500."""
    error = rota_error(exc)  # what the web's own stores (sessions, audit) got from redis-py
    if isinstance(error, RedisUnavailable):
        return _error(request, 503, await _unavailable(request, error))
    if acl_refused(error):  # an ACL user of a narrow role
        return _error(request, 403, _ACL.format(redis_cause(error)))
    if isinstance(error, RedisRefused) and error.condition:  # its message says what, and why
        return _error(request, 503, f"{error}: try again when it ends")
    raise exc  # a real error: _server_error answers 500 and the server logs it


async def _unavailable(request: Request, error: RedisUnavailable) -> str:
    """What a 503 says: over several shards, which of them cannot be read now when the
    others answer (the pages that need only those work meanwhile)."""
    try:
        client = client_of(request)
    except ApiError:
        client = state_of(request).client
    if len(client.admin.shards) > 1:
        away = await inspect.shards_away(client)
        if 0 < len(away) < len(client.admin.shards):
            return inspect.away_line(client, away)
    return f"Redis is unavailable: {redis_cause(error)}"


async def _server_error(request: Request, exc: Exception) -> Response:
    # Answered outside the middleware, so plain JSON whoever asks (uvicorn logs the
    # traceback), with the headers the middleware gives every other answer.
    response = JSONResponse(Error("internal error: see the server's log"), status_code=500)
    response.headers.update({k.decode(): v.decode() for k, v in SECURITY_HEADERS})
    response.headers["cache-control"] = "no-store"
    return response


#: What each error is answered with: a Redis refusal (or a bug: 500), the web's own
#: stores' errors (sessions, audit) too.
_HANDLERS: Final[dict[Any, Any]] = {
    ApiError: _http_error,
    HTTPException: _http_error,
    RedisUnavailable: _redis_trouble,
    RedisRefused: _redis_trouble,
    RedisError: _redis_trouble,
    Exception: _server_error,
}


@contextlib.asynccontextmanager
async def _lifespan(
    app: Starlette, closing: list[Client], following: list[Client]
) -> AsyncIterator[None]:
    """Follow a Sentinel failover while the app runs (see :mod:`rota.redis.sentinel`), and
    the shard record of each namespace whose client the app made (a change of its count:
    see rota.client.follow; a client given to the app is its giver's to follow, on the
    giver's event loop), and close the clients the app made when it stops."""
    try:
        async with anyio.create_task_group() as tg:
            for each in following:
                tg.start_soon(each.follow_primary)
            for each in closing:
                tg.start_soon(_follow_record, each)
            yield
            tg.cancel_scope.cancel()
    finally:  # shielded: a lifespan cancelled from outside still closes its clients
        with anyio.CancelScope(shield=True):
            for each in closing:
                await each.close()


#: Seconds between the web's reads of a namespace's shard record.
RECORD_EVERY: Final = 5.0


async def _follow_record(client: Client) -> None:
    """Read the shard record now and every :data:`RECORD_EVERY` seconds: the pages show
    every shard served during a change of the count. A record that names no count, or
    a Redis away, leaves the shards as they were until the next read. A read is never
    cut in the middle (shielded, at most 5 s): a connection cancelled half-way through
    its reply would be left neither in use nor free, and outlive the app's client."""
    while True:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(5),
            contextlib.suppress(ValueError, RedisRefused, RedisUnavailable),
        ):
            await client.admin.follower.reread()
        await anyio.sleep(RECORD_EVERY)


def create_app(
    settings: Settings,
    *,
    auth: Auth | None = None,
    allowed_hosts: frozenset[str] | None = None,
    client: Client | None = None,
    namespaces: Sequence[str] = (),
) -> Starlette:
    """The web UI and API of ``settings.namespace``.

    ``auth``: credentials that open it (none: open to whoever reaches it).
    ``allowed_hosts``: Host header names answered (None: any); ``rota web`` passes the
    loopback names when it listens on loopback. ``client``: use this client instead of
    one made from ``settings`` (it is not closed). ``namespaces``: more namespaces to
    show beside ``settings.namespace`` (a switch in the header; ``?ns=`` in the API), each
    reached as the settings say, on the node that holds it in a cluster. Raises
    ``ValueError`` when ``settings.redis_url`` is not a Redis URL.
    """
    own = client is None
    if client is None:  # ValueError for a URL that is not one
        client = Client.from_settings(settings)
    others = {
        ns: Client.from_settings(settings.replace(namespace=ns))
        for ns in dict.fromkeys(namespaces)
        if ns != settings.namespace
    }
    state = WebState(settings, auth or Auth(), make_templates(), client, others)
    limit = authed_limit(settings.max_args_bytes)
    app = Starlette(
        routes=[
            *openapi.ROUTES,
            Route("/api/openapi.json", openapi.serve),
            Route("/metrics", metrics),
            Route("/healthz", healthz),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=stack(state.auth, allowed_hosts, _error, state.sessions, state.audit, limit),
        exception_handlers=_HANDLERS,
        lifespan=functools.partial(
            _lifespan,
            closing=[*others.values(), *([client] if own else [])],
            following=[client, *others.values()],
        ),
    )
    app.state.rota = state
    return app
