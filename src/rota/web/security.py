"""Who may use the web server, and which requests may change anything.

One ASGI middleware, in front of every route:

- **Host**: when the server listens on loopback only, a request must name a loopback
  host, so a web page cannot reach it through DNS rebinding.
- **Authentication** (when ``--auth`` or ``--token`` is given): HTTP Basic, a Bearer
  token, or the session cookie set by the login form (:mod:`rota.web.sessions`: it
  expires, and logout or a new token ends it). ``/healthz``, ``/login`` and the
  static files are open.
- **Cross-site requests**: a request that changes anything (any method but GET, HEAD
  and OPTIONS) must come from the same origin. Browsers say where a request comes from
  (``Sec-Fetch-Site``, else ``Origin``); a cross-origin one is refused with 403. A
  request that says neither is not from a modern browser: it passes when it carries
  credentials in its ``Authorization`` header (a browser never adds those to a forged
  request by itself), or a CSRF token (the ``rota_csrf`` cookie repeated in the
  ``csrf`` form field or the ``X-CSRF-Token`` header), or when authentication is off.
- **Bodies**: read through a limit as they stream in, a small one without
  credentials (:mod:`rota.web.limits`), so nothing parses more than that.
- **Headers**: a Content-Security-Policy without inline scripts, nosniff,
  ``frame-ancestors 'none'`` and a same-origin referrer policy on every response.
- **Failed logins** (a wrong ``Authorization`` header, a wrong token in the login form)
  are counted per client address: from the 5th in a row, the address must wait 1 s, then
  2, 4... (at most 5 minutes) before its next try, answered 429 with ``Retry-After``
  meanwhile, so a token cannot be guessed at full speed. Only the admin credentials
  (the token, Basic) clear the count when right: the read-only and metrics tokens and
  a session cookie, right, leave it as it was, so whoever holds the weakest credential
  cannot guess the strongest at full speed. A count is forgotten an hour after its
  last wait ends.
  Behind a reverse proxy the address is the one it forwards, when the proxy is trusted
  (``rota web --trusted-proxy``); cookies are ``Secure`` when the scheme, told by such a
  proxy or seen by the server, is HTTPS.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import structlog
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rota.web.audit import AuditLog, acted_on, who
from rota.web.limits import OPEN_LIMIT, declared, form_field, limited
from rota.web.sessions import DEFAULT_TTL, Sessions

__all__ = [
    "CSRF_COOKIE",
    "SECURITY_HEADERS",
    "SESSION_COOKIE",
    "Auth",
    "SecurityMiddleware",
    "Throttle",
    "is_loopback",
]

CSRF_COOKIE: Final = "rota_csrf"
SESSION_COOKIE: Final = "rota_session"
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "x-csrf-token"
#: What credentials may do: anything, or look only (see :attr:`Auth.readonly_token`).
ADMIN: Final = "admin"
READ: Final = "read"
#: What a read-only login may still post: its own login and logout.
_READONLY_POSTS: Final = frozenset({"/login", "/logout"})
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_OPEN_PATHS: Final = ("/healthz", "/login")

CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS: Final = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Auth:
    """The credentials that open the server; both None: no authentication."""

    basic: tuple[str, str] | None = None
    token: str | None = None
    session_ttl: float = DEFAULT_TTL  # how long a login lasts (see rota.web.sessions)
    metrics_token: str | None = None  # opens GET /metrics, and nothing else
    readonly_token: str | None = None  # opens every page and GET, and no change

    @property
    def enabled(self) -> bool:
        return self.basic is not None or self.token is not None

    def check_token(self, candidate: str) -> bool:
        return self.token is not None and _same(candidate, self.token)

    def token_role(self, candidate: str) -> str | None:
        """``"admin"`` for the token, ``"read"`` for the read-only one, else None."""
        if self.check_token(candidate):
            return ADMIN
        if self.readonly_token is not None and _same(candidate, self.readonly_token):
            return READ
        return None

    def header_role(self, authorization: str | None, path: str = "") -> str | None:
        """What the ``Authorization`` header's credentials may do at ``path``: ``"admin"``
        (anything), ``"read"`` (the read-only token, and the metrics token at
        ``/metrics``), or None (nothing: no credentials, or wrong ones)."""
        if not authorization:
            return None
        scheme, _, value = authorization.partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer":
            role = self.token_role(value)
            if role is None and path == "/metrics" and self.metrics_token is not None:
                role = READ if _same(value, self.metrics_token) else None
            return role
        if scheme == "basic" and self.basic is not None:
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            ok = bool(sep) and _same(user, self.basic[0]) & _same(password, self.basic[1])
            return ADMIN if ok else None
        return None

    def challenge(self) -> str:
        return 'Basic realm="rota", charset="UTF-8"' if self.basic else 'Bearer realm="rota"'


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _cookies(headers: Headers) -> dict[str, str]:
    """Cookies, parsed leniently: a malformed cookie of another app on the same host
    (cookies ignore ports) must not hide ours."""
    out: dict[str, str] = {}
    for raw in headers.getlist("cookie"):
        out.update(cookie_parser(raw))
    return out


def _host_name(host: str) -> str:
    """The host of a Host header value, without the port; IPv6 without brackets."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def origin_verdict(headers: Headers) -> str:
    """'same', 'cross' or 'unknown' (the request does not say where it comes from)."""
    site = headers.get("sec-fetch-site")
    if site == "same-origin":
        return "same"
    if site in ("same-site", "cross-site"):
        return "cross"
    origin = headers.get("origin")
    if origin is None:
        return "unknown"
    host = headers.get("host", "")
    parts = urlsplit(origin)
    if origin == "null" or not parts.netloc or parts.netloc.lower() != host.lower():
        return "cross"
    return "same"


log = structlog.get_logger("rota.web")

RenderRefusal = Callable[[Request, int, str, Auth], Response]


class Throttle:
    """Failed logins per client address (see the module's docstring)."""

    FREE: Final = 4  # failures in a row answered at full speed
    MAX_WAIT: Final = 300.0
    MAX_ADDRESSES: Final = 10_000
    #: Seconds after its wait ends that a count is forgotten: an address that has
    #: stopped failing (a reader who mistyped once, long ago) starts afresh.
    FORGET: Final = 3600.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._failures: dict[str, tuple[int, float]] = {}  # address -> (count, until)

    def _entry(self, address: str) -> tuple[int, float]:
        """The count and end of wait of ``address``, (0, 0) once forgotten."""
        count, until = self._failures.get(address, (0, 0.0))
        return (count, until) if self.clock() < until + self.FORGET else (0, 0.0)

    def wait(self, address: str) -> float:
        """Seconds ``address`` must wait before its next try (0: it may try now)."""
        return max(0.0, self._entry(address)[1] - self.clock())

    def failed(self, address: str) -> None:
        """Count a failure, or reserve one for an attempt not yet evaluated."""
        count = self._entry(address)[0] + 1
        self._failures.pop(address, None)
        wait = 0.0 if count <= self.FREE else min(self.MAX_WAIT, 2.0 ** (count - self.FREE - 1))
        if len(self._failures) >= self.MAX_ADDRESSES:  # forget the oldest entry
            self._failures.pop(next(iter(self._failures)))
        self._failures[address] = (count, self.clock() + wait)

    def taken_back(self, address: str) -> None:
        """Undo the failure reserved for a login whose credentials were right but open
        less than everything (the read-only token): the failures before it stay counted.
        No wait is left: an attempt is reserved only once the wait has ended."""
        count = self._entry(address)[0]
        self._failures.pop(address, None)
        if count > 1:
            self._failures[address] = (count - 1, self.clock())

    def succeeded(self, address: str) -> None:
        """Clear the count: the admin credentials were right."""
        self._failures.pop(address, None)


class SecurityMiddleware:
    """See the module's docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: Auth,
        allowed_hosts: frozenset[str] | None,
        render: RenderRefusal,
        sessions: Sessions | None = None,
        body_limit: int = OPEN_LIMIT,
        audit: AuditLog | None = None,
    ) -> None:
        self.app = app
        self.audit = audit  # where changes that went through are recorded
        self.body_limit = body_limit  # an authenticated request's (see rota.web.limits)
        self.auth = auth
        self.sessions = sessions
        self.allowed_hosts = allowed_hosts
        self.render = render
        self.throttle = Throttle()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cookies = _cookies(headers)
        request = Request(scope)
        new_csrf = None
        csrf = cookies.get(CSRF_COOKIE, "")
        if len(csrf) < 32:
            csrf = new_csrf = secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf"] = csrf
        https = scope.get("scheme") == "https"
        address = (scope.get("client") or ("unknown",))[0]
        login = scope["path"] == "/login" and scope["method"] == "POST"
        attempt = self.auth.enabled and ("authorization" in headers or login)
        changes = scope["method"] not in _SAFE_METHODS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Only a login form that was let in takes back its reserved failure
                # (and clears the count when it was the admin token); any other answer
                # leaves it counted (a bearer header is settled on arrival).
                if attempt and login and message["status"] < 400:
                    if scope["state"].get("login_role") == ADMIN:
                        self.throttle.succeeded(address)
                    else:
                        self.throttle.taken_back(address)
                elif attempt and login and message["status"] == 401:
                    log.warning("failed login", address=address, path="/login", by="form")
                if self.audit is not None and changes and message["status"] < 400:
                    await self._record(scope, headers, cookies, address, message["status"])
                out = [h for h in message.get("headers", []) if h[0].lower() != b"server"]
                out += SECURITY_HEADERS
                if not request.url.path.startswith("/static/"):
                    out.append((b"cache-control", b"no-store"))
                if new_csrf is not None:
                    flags = "; Path=/; SameSite=Strict; HttpOnly" + ("; Secure" if https else "")
                    out.append((b"set-cookie", f"{CSRF_COOKIE}={new_csrf}{flags}".encode()))
                message = {**message, "headers": out}
            await send(message)

        wait = self.throttle.wait(address) if attempt else 0.0
        if wait > 0:
            refusal = JSONResponse(
                {"error": "too many failed logins: try again later"},
                status_code=429,
                headers={"retry-after": str(math.ceil(wait))},
            )
            await refusal(scope, receive, send_with_headers)
            return
        if attempt:
            self._settle(scope, headers, address, login)
        try:
            declared(headers, self.body_limit)  # before a byte is read, even for CSRF
            status, text, receive, authed = await self._check(
                scope, headers, cookies, csrf, new_csrf, receive
            )
            limit = self.body_limit if authed else OPEN_LIMIT
            if not status:
                declared(headers, limit)
        except HTTPException as exc:
            status, text = exc.status_code, exc.detail
        if status:
            response = self.render(request, status, text, self.auth)
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, limited(receive, limit), send_with_headers)

    async def _record(
        self, scope: Scope, headers: Headers, cookies: dict[str, str], address: str, status: int
    ) -> None:
        """A change that went through, into the audit log (see rota.web.audit)."""
        assert self.audit is not None
        query = scope.get("query_string", b"").decode(errors="replace")
        await self.audit.record(
            who="login form"
            if scope["path"] == "/login"
            else who(headers, cookies.get(SESSION_COOKIE)),
            address=address,
            method=scope["method"],
            path=scope["path"] + (f"?{query}" if query else ""),
            status=status,
            **acted_on(scope["state"]),
        )

    def _settle(self, scope: Scope, headers: Headers, address: str, login: bool) -> None:
        """Count an attempt before it is evaluated: a failure is reserved on arrival (so
        many attempts sent together cannot all be evaluated before the first is counted,
        whenever their bodies come), and cleared only by admin credentials that were
        checked and right: a bearer header here, a login form by its answer. A right
        header that opens less (read-only, metrics) is not counted and clears nothing;
        a read-only login takes back its reservation. An open path answered 200 proves
        nothing, so it clears nothing."""
        role = self.auth.header_role(headers.get("authorization"), scope["path"])
        if login or role is None:
            self.throttle.failed(address)
        if role == ADMIN:
            self.throttle.succeeded(address)
        elif role is None and "authorization" in headers:
            log.warning("failed login", address=address, path=scope["path"], by="authorization")

    async def _check(
        self,
        scope: Scope,
        headers: Headers,
        cookies: dict[str, str],
        csrf: str,
        new_csrf: str | None,
        receive: Receive,
    ) -> tuple[int, str, Receive, bool]:
        """The status and message to refuse with (0: let it pass), the receive to use
        from now on (it replays the body when the body was read here), and whether the
        request is authenticated (or needs no authentication)."""
        if self.allowed_hosts is not None:
            host = _host_name(headers.get("host", "")).lower()
            if host not in self.allowed_hosts:
                names = ", ".join(sorted(self.allowed_hosts))
                return 400, f"unknown host: this server answers to {names} only", receive, False
        role = self.auth.header_role(headers.get("authorization"), scope["path"])
        header_auth = self.auth.enabled and role is not None
        path: str = scope["path"]
        # A session costs a Redis read: not for the static files (open, and a page
        # loads several), nor when the header has opened the request already.
        cookie = cookies.get(SESSION_COOKIE)
        session = (
            self.sessions is not None
            and not header_auth
            and not path.startswith("/static/")
            and await self.sessions.valid(cookie)
        )
        scope["state"]["session"] = session  # a live login: the pages offer to log out
        authed = not self.auth.enabled or header_auth or session
        if not authed and not (path in _OPEN_PATHS or path.startswith("/static/")):
            return 401, "authentication required", receive, False
        readonly = (header_auth and role == READ) or (session and Sessions.readonly(cookie))
        scope["state"]["readonly"] = readonly  # the pages leave out their actions
        if readonly and scope["method"] not in _SAFE_METHODS and path not in _READONLY_POSTS:
            return 403, "read-only credentials: a change needs the admin token", receive, authed
        if scope["method"] not in _SAFE_METHODS:
            verdict = origin_verdict(headers)
            if verdict == "cross":
                return 403, "cross-site request refused", receive, authed
            if verdict == "unknown" and self.auth.enabled and not header_auth:
                token = headers.get(CSRF_HEADER)
                if token is None:
                    limit = self.body_limit if authed else OPEN_LIMIT
                    token, receive = await form_field(headers, receive, CSRF_FIELD, limit)
                if new_csrf is not None or not token or not _same(token, csrf):
                    return 403, "missing or wrong CSRF token", receive, authed
        return 0, "", receive, authed


def json_refusal(status: int, text: str, auth: Auth) -> Response:
    headers = {"www-authenticate": auth.challenge()} if status == 401 else None
    return JSONResponse({"error": text}, status_code=status, headers=headers)


def wants_json(request: Request) -> bool:
    path = request.url.path
    if path.startswith(("/api/", "/metrics")) or path == "/healthz":
        return True
    return "text/html" not in request.headers.get("accept", "")
