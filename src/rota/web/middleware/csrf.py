"""Cross-site requests: a request that changes anything (any method but GET, HEAD and
OPTIONS) must come from the same origin.

Browsers say where a request comes from (``Sec-Fetch-Site``, else ``Origin``); a
cross-origin one is refused with 403. A request that says neither is not from a modern
browser: it passes when it carries credentials in its ``Authorization`` header (a
browser never adds those to a forged request by itself), or a CSRF token (the
``rota_csrf`` cookie repeated in the ``csrf`` form field or the ``X-CSRF-Token``
header), or when authentication is off.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

from rota.web.middleware.auth import Auth, same
from rota.web.middleware.headers import SAFE_METHODS, Layer, cookies, on_start
from rota.web.middleware.limits import OPEN_LIMIT, form_field

__all__ = ["CSRF_COOKIE", "CsrfCheck", "CsrfToken", "origin_verdict"]

CSRF_COOKIE: Final = "rota_csrf"
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "x-csrf-token"


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
    parts = urlsplit(origin)
    if (
        origin == "null"
        or not parts.netloc
        or parts.netloc.lower() != headers.get("host", "").lower()
    ):
        return "cross"
    return "same"


class CsrfToken(Layer):
    """The browser's CSRF token (``state.csrf``, which the pages' forms carry): its
    cookie's, or a new one, set on whatever answer the request gets."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        csrf = cookies(Headers(scope=scope)).get(CSRF_COOKIE, "")
        new = len(csrf) < 32
        if new:
            csrf = secrets.token_urlsafe(32)
        scope.setdefault("state", {}).update(csrf=csrf, new_csrf=new)

        async def set_cookie(message: Message) -> None:
            flags = "; Path=/; SameSite=Strict; HttpOnly"
            flags += "; Secure" if scope.get("scheme") == "https" else ""
            cookie = (b"set-cookie", f"{CSRF_COOKIE}={csrf}{flags}".encode())
            message["headers"] = [*message.get("headers", []), cookie]

        await self.app(scope, receive, on_start(send, set_cookie) if new else send)


@dataclass
class CsrfCheck(Layer):
    auth: Auth
    body_limit: int

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in SAFE_METHODS:
            headers, state = Headers(scope=scope), scope["state"]
            verdict = origin_verdict(headers)
            text = "cross-site request refused" if verdict == "cross" else ""
            if verdict == "unknown" and self.auth.enabled and not state["header_auth"]:
                token = headers.get(CSRF_HEADER)
                try:
                    if token is None:
                        limit = self.body_limit if state["authed"] else OPEN_LIMIT
                        token, receive = await form_field(headers, receive, CSRF_FIELD, limit)
                except HTTPException as exc:
                    return await self.refuse(scope, receive, send, exc.status_code, exc.detail)
                if state["new_csrf"] or not token or not same(token, state["csrf"]):
                    text = "missing or wrong CSRF token"
            if text:
                return await self.refuse(scope, receive, send, 403, text)
        await self.app(scope, receive, send)
