"""How much of a request body the server reads, checked while it streams in, before
anything parses it (Starlette reads a body whole: a 200 MB ``POST`` was in memory before
a handler could refuse it). A body declared larger than its limit is refused before a
byte of it is read, one without a length cut off the moment it passes it: a 413 either
way. A request without credentials may send a few KiB; an authenticated one as much as
an enqueue may carry (``max_args_bytes``, plus room for the rest of the body).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

from rota.web.middleware.headers import Layer

__all__ = ["OPEN_LIMIT", "BodyLimit", "authed_limit", "declared", "form_field", "limited"]

#: What a request without credentials may send: the login form is a token and two
#: hidden fields.
OPEN_LIMIT: Final = 16 * 1024
#: Room in an authenticated body beside its args: the name, the options, ids to retry.
_ROOM: Final = 256 * 1024
#: The most the security middleware reads of a form to find its CSRF field: no form of
#: this server comes near it, so a larger one is refused whatever it holds.
_MAX_FORM_BYTES: Final = 64 * 1024


def authed_limit(max_args_bytes: int) -> int:
    """The body limit of an authenticated request: the largest args an enqueue takes
    (a client that escapes every character past ASCII, as Python's json does, sends up
    to three times their UTF-8), plus room."""
    return 3 * max_args_bytes + _ROOM


def too_large(limit: int) -> HTTPException:
    """The 413 of a body over ``limit``, saying the limit, and that a request without
    credentials has the small one (a login form is the usual case)."""
    who = " without credentials" if limit == OPEN_LIMIT else ""
    return HTTPException(
        413, f"the body is larger than this server takes here ({limit} bytes{who})"
    )


def declared(headers: Headers, limit: int) -> None:
    """Refuse a body whose ``Content-Length`` is over ``limit``, before reading it."""
    length = headers.get("content-length")
    if length is None:
        return
    length = length.strip()
    if not (length.isascii() and length.isdigit()):  # '²' is a digit to str.isdigit
        raise HTTPException(400, "Content-Length is not a number")
    if int(length) > limit:
        raise too_large(limit)


def limited(receive: Receive, limit: int) -> Receive:
    """``receive``, ending the request with 413 once its body passes ``limit`` bytes:
    the bytes are counted as they arrive, so a body without a length is stopped there."""
    seen = 0

    async def receive_limited() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return receive_limited


async def form_field(
    headers: Headers, receive: Receive, field: str, limit: int
) -> tuple[str | None, Receive]:
    """The value of ``field`` in a urlencoded body, and a receive that replays the body
    for the route. It reads at most ``limit`` bytes (413 past that) and no more than
    a form of this server can hold (``None`` past that: no token, refused anyway)."""
    cap = min(limit, _MAX_FORM_BYTES)
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        body = message.get("body", b"")
        size += len(body)
        if size > cap:
            if size > limit:
                raise too_large(limit)
            return None, receive
        chunks.append(body)
        more = message.get("more_body", False)
    data = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        return await receive()

    value = None
    if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        try:
            values = parse_qs(data.decode("latin-1"), max_num_fields=100).get(field)
        except ValueError:  # too many fields: no form of this server
            values = None
        value = values[0] if values else None
    return value, replay


@dataclass
class BodyLimit(Layer):
    """A body declared over ``limit`` is refused before a byte of it is read. Twice in
    the stack: first with the authenticated limit, before anything else reads; then,
    ``by_auth``, after authentication, with the open limit for a request without
    credentials, and the body read through it."""

    limit: int
    by_auth: bool = False

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit if not self.by_auth or scope["state"]["authed"] else OPEN_LIMIT
        try:
            declared(Headers(scope=scope), limit)
        except HTTPException as exc:
            return await self.refuse(scope, receive, send, exc.status_code, exc.detail)
        await self.app(scope, limited(receive, limit) if self.by_auth else receive, send)
