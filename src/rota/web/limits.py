"""How much of a request body the server reads: a limit checked while it streams in,
before anything parses it.

Starlette reads a body whole (``request.body()``, ``request.form()``), so a 200 MB
``POST`` was in memory before any handler could refuse it, and the login form, open to
anyone, buffered whatever fields were sent. Here a body declared larger than its limit
(``Content-Length``) is refused before a byte of it is read, and one that streams in
without a length (chunked) is cut off the moment it passes the limit: either way a 413
with the headers every answer carries. The limit depends on who asks: a request without
credentials (the login form, the open paths) may send a few KiB; an authenticated one as
much as an enqueue may carry (``max_args_bytes``, plus room for the rest of the body).
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive

__all__ = ["OPEN_LIMIT", "authed_limit", "declared", "limited"]

#: What a request without credentials may send: the login form is a token and two
#: hidden fields.
OPEN_LIMIT: Final = 16 * 1024
#: Room in an authenticated body beside its args: the name, the options, ids to retry.
_ROOM: Final = 256 * 1024


def authed_limit(max_args_bytes: int) -> int:
    """The body limit of an authenticated request: the largest args an enqueue takes
    (a client that escapes every character past ASCII, as Python's json does, sends up
    to three times their UTF-8), plus room."""
    return 3 * max_args_bytes + _ROOM


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the body is larger than this server takes here ({limit} bytes)")


def declared(headers: Headers, limit: int) -> None:
    """Refuse a body whose ``Content-Length`` is over ``limit``, before reading it."""
    length = headers.get("content-length")
    if length is None:
        return
    if not length.strip().isdigit():
        raise HTTPException(400, "Content-Length is not a number")
    if int(length) > limit:
        raise _too_large(limit)


def limited(receive: Receive, limit: int) -> Receive:
    """``receive``, ending the request with 413 once its body passes ``limit`` bytes."""
    seen = 0

    async def receive_limited() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit)
        return message

    return receive_limited
