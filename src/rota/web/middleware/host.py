"""The Host header: when the server listens on loopback only, a request must name a
loopback host, so that a web page cannot reach it through DNS rebinding.

Starlette's ``TrustedHostMiddleware`` answers a plain-text "Invalid host header"; this
one says which names are answered, as a page or as JSON like every other refusal.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from rota.web.middleware.headers import Layer

__all__ = ["HostCheck", "host_name", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The host of a Host header value, without the port; IPv6 without brackets."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


@dataclass
class HostCheck(Layer):
    allowed: frozenset[str] | None

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.allowed is not None:
            host = Headers(scope=scope).get("host", "")
            if host_name(host).lower() not in self.allowed:
                names = ", ".join(sorted(self.allowed))
                text = f"unknown host: this server answers to {names} only"
                return await self.refuse(scope, receive, send, 400, text)
        await self.app(scope, receive, send)
