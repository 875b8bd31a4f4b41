"""The headers every answer carries, and what the other middlewares of the stack share.

A Content-Security-Policy without inline scripts, nosniff, ``frame-ancestors 'none'``
and a same-origin referrer policy on every response; ``no-store`` on all but the static
files, and no ``Server`` header.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CSP",
    "SAFE_METHODS",
    "SECURITY_HEADERS",
    "Layer",
    "Refuse",
    "SecurityHeaders",
    "cookies",
    "on_start",
]

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
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

#: How a middleware says no: a JSON body for the API, a page for people (see app.py).
Refuse = Callable[[Request, int, str], Response]


def cookies(headers: Headers) -> dict[str, str]:
    """Cookies, parsed leniently: a malformed cookie of another app on the same host
    (cookies ignore ports) must not hide ours."""
    out: dict[str, str] = {}
    for raw in headers.getlist("cookie"):
        out.update(cookie_parser(raw))
    return out


def on_start(send: Send, hook: Callable[[Message], Awaitable[None]]) -> Send:
    """``send``, calling ``hook`` with the answer's start (its status and headers) first."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            await hook(message)
        await send(message)

    return sending


@dataclass
class Layer:
    """A middleware of the stack: it sees HTTP requests only (:meth:`http`), and says no
    as ``refused`` renders it."""

    app: ASGIApp
    refused: Refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        else:
            await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, text: str
    ) -> None:
        await self.refused(Request(scope), status, text)(scope, receive, send)


class SecurityHeaders(Layer):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        static = scope["path"].startswith("/static/")

        async def add(message: Message) -> None:
            out = [h for h in message.get("headers", []) if h[0].lower() != b"server"]
            out += SECURITY_HEADERS
            if not static:
                out.append((b"cache-control", b"no-store"))
            message["headers"] = out

        await self.app(scope, receive, on_start(send, add))
