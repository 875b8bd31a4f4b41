"""Who may use the web server (when ``--auth`` or ``--token`` is given), and the audit
trail of what they changed.

A request opens the server with HTTP Basic, a Bearer token, or the session cookie the
login form sets (:mod:`rota.web.sessions`: it expires, and logout or a new token ends
it); ``/healthz``, ``/login`` and the static files are open. The read-only token (and a
login with it) opens every page and GET, and no change. Every change let through and
answered without an error goes into the audit log (:mod:`rota.web.audit`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from rota.web.audit import AuditLog, acted_on, who
from rota.web.middleware.headers import SAFE_METHODS, Layer, cookies, on_start
from rota.web.sessions import DEFAULT_TTL, Sessions

__all__ = ["ADMIN", "READ", "SESSION_COOKIE", "AuditTrail", "Auth", "Authenticate", "same"]

SESSION_COOKIE: Final = "rota_session"
#: What credentials may do: anything, or look only (see :attr:`Auth.readonly_token`).
ADMIN: Final = "admin"
READ: Final = "read"
#: What a read-only login may still post: its own login and logout.
_READONLY_POSTS: Final = frozenset({"/login", "/logout"})
_OPEN_PATHS: Final = ("/healthz", "/login")


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


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
        return self.token is not None and same(candidate, self.token)

    def token_role(self, candidate: str) -> str | None:
        """``"admin"`` for the token, ``"read"`` for the read-only one, else None."""
        if self.check_token(candidate):
            return ADMIN
        if self.readonly_token is not None and same(candidate, self.readonly_token):
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
                role = READ if same(value, self.metrics_token) else None
            return role
        if scheme == "basic" and self.basic is not None:
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            ok = bool(sep) and same(user, self.basic[0]) & same(password, self.basic[1])
            return ADMIN if ok else None
        return None

    def challenge(self) -> str:
        return 'Basic realm="rota", charset="UTF-8"' if self.basic else 'Bearer realm="rota"'


@dataclass
class Authenticate(Layer):
    """401 without credentials, 403 for a change with read-only ones. It leaves in the
    request's state whether it is ``authed`` (or needs no authentication), by its
    ``Authorization`` header (``header_auth``), by a live ``session``, ``readonly``."""

    auth: Auth
    sessions: Sessions | None

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        state, path = scope["state"], scope["path"]
        headers = Headers(scope=scope)
        role = self.auth.header_role(headers.get("authorization"), path)
        header_auth = self.auth.enabled and role is not None
        # A session costs a Redis read: not for the static files (open, and a page
        # loads several), nor when the header has opened the request already.
        cookie = cookies(headers).get(SESSION_COOKIE)
        static = path.startswith("/static/")
        session = (
            self.sessions is not None
            and not header_auth
            and not static
            and await self.sessions.valid(cookie)
        )
        authed = not self.auth.enabled or header_auth or session
        state.update(session=session, header_auth=header_auth, authed=authed)
        if not authed and not (path in _OPEN_PATHS or static):
            return await self.refuse(scope, receive, send, 401, "authentication required")
        readonly = (header_auth and role == READ) or (session and Sessions.readonly(cookie))
        state["readonly"] = readonly  # the pages leave out their actions
        if readonly and scope["method"] not in SAFE_METHODS and path not in _READONLY_POSTS:
            text = "read-only credentials: a change needs the admin token"
            return await self.refuse(scope, receive, send, 403, text)
        await self.app(scope, receive, send)


@dataclass
class AuditTrail(Layer):
    """A change that went through, into the audit log."""

    audit: AuditLog

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in SAFE_METHODS:
            return await self.app(scope, receive, send)

        async def record(message: Message) -> None:
            if message["status"] >= 400:
                return
            headers = Headers(scope=scope)
            query = scope.get("query_string", b"").decode(errors="replace")
            login = scope["path"] == "/login"
            await self.audit.record(
                who="login form" if login else who(headers, cookies(headers).get(SESSION_COOKIE)),
                address=str((scope.get("client") or ("unknown",))[0]),
                method=scope["method"],
                path=scope["path"] + (f"?{query}" if query else ""),
                status=message["status"],
                **acted_on(scope["state"]),
            )

        await self.app(scope, receive, on_start(send, record))
