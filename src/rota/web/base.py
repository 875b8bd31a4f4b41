"""What every endpoint shares: the app's state, the client of the namespace asked for,
the pages' rendering, errors and parameters."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

import jinja2
import msgspec
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from rota.client import Client
from rota.client.status import duration
from rota.config import Settings
from rota.protocol.job import malformed_time, ms_time, validate_name
from rota.version import __version__
from rota.web.audit import AuditLog
from rota.web.middleware.auth import Auth
from rota.web.sessions import Sessions

__all__ = [
    "NS_COOKIE",
    "SHOWN_LIMIT",
    "ApiError",
    "JSONResponse",
    "WebState",
    "client_of",
    "render",
]

#: The cookie that remembers which namespace a browser looks at.
NS_COOKIE: Final = "rota_ns"
#: The most characters of one value (args, a result, an error) a page shows; the rest
#: is a link away, so that a page stays small whatever a job holds.
SHOWN_LIMIT: Final = 32 * 1024
_NOTICES: Final = {
    "paused": "Queue paused.",
    "resumed": "Queue resumed.",
    "cleared": "{n} queued jobs deleted.",
    "retried": "{n} jobs queued again.",
    "deleted": "{n} jobs deleted.",
    "none-selected": "No job selected: tick the jobs to act on first.",
    "aborted": "Abort requested.",
    "fronted": "Job moved to the front of its queue: it runs next.",
    "killed": "{n} jobs killed: moved to the dead set.",
    "cleaned": "{n} jobs older than the age deleted.",
    "rate-set": "Rate limit set.",
    "rate-removed": "Rate limit removed.",
    "limit-set": "Concurrency limit set.",
    "limit-removed": "Concurrency limit removed.",
    "cron-off": "Periodic job turned off: its fire times pass without a job.",
    "cron-on": "Periodic job turned on again.",
    "cron-run": "One run of the periodic job enqueued now; its schedule goes on as planned.",
    "enqueued": "Job enqueued.",
    "enqueued-held": "Nothing new enqueued: this job holds the unique key (or the id).",
    "edited": "Args replaced: the job is queued again with them.",
    "key-paused": "Fair key paused.",
    "key-resumed": "Fair key resumed.",
    "key-cleared": "{n} queued jobs of the key deleted.",
    "key-limit-set": "Key limit set.",
    "key-limit-removed": "Key limit removed.",
    "key-weight-set": "Key weight set.",
    "key-weight-removed": "Key weight back to 1.",
    "key-rate-set": "Key rate limit set.",
    "key-rate-removed": "Key rate limit removed.",
    "key-default-set": "Default key limit set.",
    "key-default-removed": "Default key limit removed.",
    "pools-quiet": "{n} pools told to be quiet: each says so once it obeys.",
    "pools-stop": "{n} pools told to stop: each drains, then leaves.",
    "pools-resume": "{n} pools told to fetch again.",
}


class ApiError(Exception):
    """Answer with this status and ``{"error": message}`` (a page, for a browser)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


@dataclass
class WebState:
    """Everything a request handler needs, kept on ``app.state.rota``. ``clients``: one
    per namespace the UI shows, the first being ``client`` (``settings.namespace``)."""

    settings: Settings
    auth: Auth
    templates: jinja2.Environment
    client: Client
    clients: dict[str, Client] = field(default_factory=dict)
    sessions: Sessions | None = None  # the login form's sessions (token authentication)
    audit: AuditLog = field(init=False)  # the changes made through the UI and the API

    def __post_init__(self) -> None:
        self.clients = {self.client.namespace: self.client, **self.clients}
        self.audit = AuditLog(self.client)
        if self.auth.token is not None and self.sessions is None:
            self.sessions = Sessions(self.auth.token, self.auth.session_ttl, self.client)


def state_of(request: Request) -> WebState:
    st: WebState = request.app.state.rota
    return st


def client_of(request: Request) -> Client:
    """The client of the namespace the request asks for: ``?ns=`` (an unknown one is a
    404), else the browser's choice (its cookie), else the first."""
    st, asked = state_of(request), request.query_params.get("ns")
    if asked is not None and asked not in st.clients:
        raise ApiError(404, f"namespace {asked[:80]!r} is not shown here: {', '.join(st.clients)}")
    return (
        st.clients[asked]
        if asked
        else st.clients.get(request.cookies.get(NS_COOKIE, ""), st.client)
    )


async def known_queue(request: Request) -> str:
    """The queue named in the path; a 404 unless it is a job name of the namespace."""
    name: str = request.path_params["name"]
    try:
        validate_name(name)
    except ValueError:
        raise ApiError(404, f"no queue {name!r}") from None
    if name not in await client_of(request).admin.names():
        raise ApiError(404, f"no queue {name!r}")
    return name


def local_path(target: str | None, default: str) -> str:
    """``target`` if it is a path on this server (never another site), else ``default``."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target


def with_notice(target: str, done: str, n: int | None = None) -> str:
    url = URL(target).include_query_params(done=done)
    return str(url.include_query_params(n=n)) if n is not None else str(url)


async def back(
    request: Request, default: str, done: str, n: int | None = None, gone: str | None = None
) -> Response:
    """A form's answer: a 303 back to the page it came from (its ``next``, a path on this
    server; else ``default``, and ``default`` too for a page under ``gone``, which the
    action removed), saying what was done."""
    field = (await request.form()).get("next")
    target = local_path(field if isinstance(field, str) else None, default)
    target = default if gone is not None and target.startswith(gone) else target
    return RedirectResponse(with_notice(target, done, n), status_code=303)


def _when(ms: int | None) -> str:
    moment = ms_time(ms) if ms else None
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else malformed_time(ms) if ms else ""


def _iso(ms: int | None) -> str:
    moment = ms_time(ms) if ms else None
    return moment.isoformat(timespec="seconds") if moment else ""


def _ago(ms: int | None, relative: bool = False) -> str:
    """How long ago (``relative``: "3s ago", or "in 14h40m" for a time to come)."""
    if not ms or ms_time(ms) is None:  # _when says it is malformed
        return ""
    seconds = time.time() - ms / 1000
    if not relative:
        return duration(seconds)
    return f"{duration(seconds)} ago" if seconds >= 0 else f"in {duration(-seconds)}"


def make_templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rota.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when,
        iso=_iso,
        ago=_ago,
        relative=lambda ms: _ago(ms, relative=True),
        duration=duration,
        num=lambda n: f"{n:,}".replace(",", "\u202f") if isinstance(n, int) else str(n),
        cut=lambda text: text if len(text) <= SHOWN_LIMIT else text[:SHOWN_LIMIT] + "\n…",
    )
    env.globals.update(version=__version__, static_version=__version__, shown_limit=SHOWN_LIMIT)
    return env


def render(
    request: Request,
    name: str,
    context: dict[str, Any],
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    st, done, n = state_of(request), request.query_params.get("done"), request.query_params.get("n")
    notice = _NOTICES.get(done or "")
    base = {
        "request": request,
        "path": request.url.path,
        "namespace": client_of(request).namespace,
        "namespaces": list(st.clients),
        "csrf": request.state.csrf,
        "auth": st.auth,
        # a session the middleware found live, not any cookie of that name (an ended
        # one would offer to log out on the login page it is refused with)
        "logged_in": getattr(request.state, "session", False),
        "readonly": getattr(request.state, "readonly", False),
        "notice": notice and notice.format(n=int(n) if n and n.isdigit() else 0),
        "api": None,
        "refresh": 0,
    }
    html = st.templates.get_template(name).render({**base, **context})
    return HTMLResponse(html, status_code=status, headers=headers)
