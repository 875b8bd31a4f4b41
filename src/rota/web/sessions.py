"""Login sessions of the web UI: each login its own, each with an end.

The login form (token authentication) sets a cookie
``<id>.<issued>.<expires>.<signature>``: a random session id, the second it was issued,
the second it ends, and an HMAC of the three under a key derived from the token. So, as
Flask-Login, Django and Sidekiq Web sessions do:

- every login gets a new value (the cookie of one says nothing about another);
- a session ends ``web_session_ttl`` seconds after its login (default 12 hours): the
  cookie carries that as its Max-Age, and the server refuses it after, whatever the
  browser kept. The end is signed into the cookie, so a longer ``web_session_ttl``
  set later does not bring back a session that had ended (nor a logout forgotten by
  Redis when its session was due to end); a shorter one ends sessions sooner;
- logging out ends that session on the server too: its id is kept in a Redis sorted
  set (``Keys.web_sessions_ended``) until its signed end, and every request with a
  cookie asks Redis whether its id is there;
- changing the token ends every session (the signing key comes from it).

A request whose cookie cannot be checked against Redis (Redis away) is let through
on its signature and expiry: every page and action it could reach needs Redis anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from typing import TYPE_CHECKING, Final

import structlog

from rota.client import admin_reads
from rota.wire.redispy import REDIS_ERRORS

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["DEFAULT_TTL", "Sessions"]

#: How long a login lasts by default (seconds): a working day.
DEFAULT_TTL: Final = 12 * 3600.0

log = structlog.get_logger("rota.web")


class Sessions:
    """Issue, check and end the session cookies of one token."""

    def __init__(self, token: str, ttl: float = DEFAULT_TTL, client: Client | None = None):
        self._key = hmac.new(token.encode(), b"rota web session key", hashlib.sha256).digest()
        self.ttl = ttl
        self._client = client

    def _sign(self, sid: str, issued: int, expires: int) -> str:
        message = f"{sid}.{issued}.{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def issue(self, now: float | None = None, *, readonly: bool = False) -> str:
        """The cookie value of a new session; a ``readonly`` one (a login with the
        read-only token) may look and change nothing: its id says so, under the
        signature."""
        sid = ("r" if readonly else "") + secrets.token_hex(16)
        issued = int(time.time() if now is None else now)
        expires = issued + math.ceil(self.ttl)
        return f"{sid}.{issued}.{expires}.{self._sign(sid, issued, expires)}"

    def _read(self, value: str) -> tuple[str, int] | None:
        """The id and end (epoch seconds) of a well-signed cookie that has not expired."""
        parts = value.split(".")
        if len(parts) != 4:
            return None
        sid, issued, expires, signature = parts[0], _second(parts[1]), _second(parts[2]), parts[3]
        if not sid or issued is None or expires is None or not signature:
            return None
        expected = self._sign(sid, issued, expires)
        if not hmac.compare_digest(signature.encode(), expected.encode()):  # any text
            return None
        now = time.time()
        if not issued - 60 <= now < min(expires, issued + self.ttl):  # 1 min of clock skew
            return None
        return sid, expires

    @staticmethod
    def readonly(value: str | None) -> bool:
        """Whether a cookie (one :meth:`valid` let in) is of a read-only login."""
        return bool(value) and str(value).startswith("r")

    async def valid(self, value: str | None) -> bool:
        """Whether a cookie opens the server: well signed, not expired, not ended."""
        if not value:
            return False
        read = self._read(value)
        if read is None:
            return False
        if self._client is None:
            return True
        try:
            return not await admin_reads.session_ended(self._client, read[0])
        except REDIS_ERRORS:
            return True  # see the module's docstring

    async def end(self, value: str | None) -> None:
        """End the session of a cookie (logout): Redis keeps its id until the session's
        signed end, and the set itself as long as its latest entry. A cookie that does
        not open the server ends nothing."""
        read = self._read(value or "")
        if read is None or self._client is None:
            return
        sid, expires = read
        try:
            await admin_reads.end_session(self._client, sid, expires)
        except REDIS_ERRORS as exc:
            log.warning("logout: the session could not be ended in Redis", error=str(exc))


def _second(text: str) -> int | None:
    """A time in a cookie: ASCII digits only (``'²'`` is a digit to ``str.isdigit``,
    and a ``ValueError`` to ``int``)."""
    return int(text) if text.isascii() and text.isdigit() else None
