"""Failed logins, counted per client address: from the 5th wrong ``Authorization``
header or login token in a row, the address waits 1 s, then 2, 4... (at most 5 minutes)
before its next try, answered 429 with ``Retry-After``, so a token cannot be guessed at
full speed. Only the admin credentials clear the count when right: whoever holds the
read-only or metrics token, or a session, cannot guess the admin token at full speed. A
count is forgotten an hour after its last wait ends. Behind a trusted reverse proxy
(``rota web --trusted-proxy``) the address is the one it forwards.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import structlog
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from rota.web.middleware.auth import ADMIN, Auth
from rota.web.middleware.headers import Layer, on_start

__all__ = ["LoginThrottle", "Throttle"]

log = structlog.get_logger("rota.web")


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


@dataclass
class LoginThrottle(Layer):
    auth: Auth
    throttle: Throttle = field(default_factory=Throttle)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        address = str((scope.get("client") or ("unknown",))[0])
        login = scope["path"] == "/login" and scope["method"] == "POST"
        if not (self.auth.enabled and ("authorization" in headers or login)):
            return await self.app(scope, receive, send)
        wait = self.throttle.wait(address)
        if wait > 0:
            refusal = JSONResponse(
                {"error": "too many failed logins: try again later"},
                status_code=429,
                headers={"retry-after": str(math.ceil(wait))},
            )
            return await refusal(scope, receive, send)
        self._settle(scope, headers, address, login)

        async def settled(message: Message) -> None:
            # Only a login form that was let in takes back its reserved failure (and
            # clears the count when it was the admin token); any other answer leaves it
            # counted (a bearer header is settled on arrival).
            if message["status"] < 400:
                if scope["state"].get("login_role") == ADMIN:
                    self.throttle.succeeded(address)
                else:
                    self.throttle.taken_back(address)
            elif message["status"] == 401:
                log.warning("failed login", address=address, path="/login", by="form")

        await self.app(scope, receive, on_start(send, settled) if login else send)

    def _settle(self, scope: Scope, headers: Headers, address: str, login: bool) -> None:
        """Count an attempt on arrival (attempts sent together cannot all be evaluated
        before the first is counted), cleared only by admin credentials checked right: a
        header here, a login form by its answer. A right header that opens less is not
        counted and clears nothing; an open path answered 200 proves nothing."""
        role = self.auth.header_role(headers.get("authorization"), scope["path"])
        if login or role is None:
            self.throttle.failed(address)
        if role == ADMIN:
            self.throttle.succeeded(address)
        elif role is None and "authorization" in headers:
            log.warning("failed login", address=address, path=scope["path"], by="authorization")
