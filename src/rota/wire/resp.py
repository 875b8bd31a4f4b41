"""The wire under :class:`rota.wire.link.Link`: RESP2 encoding, error replies as redis-py
raises them, and the asyncio Protocol that matches replies to calls.

Kept apart from the Link, which decides when to connect, where to, and what to do
with a connection that stops answering; this module only knows one open socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Sequence
from typing import Any, Final, cast

import hiredis
import redis.exceptions as errors

__all__ = ["ELSEWHERE", "LOST", "Wire", "encode", "reply_error"]

_Entry = tuple["asyncio.Future[Any] | None", float, list[Any] | None]

_CODES: Final[dict[str, type[errors.RedisError]]] = {
    "NOSCRIPT": errors.NoScriptError,
    "WRONGPASS": errors.AuthenticationError,
    "NOAUTH": errors.AuthenticationError,
    "NOPERM": errors.NoPermissionError,
    "LOADING": errors.BusyLoadingError,
    "READONLY": errors.ReadOnlyError,
    "OOM": errors.OutOfMemoryError,
    "EXECABORT": errors.ExecAbortError,
}
_ERR: Final[dict[str, type[errors.RedisError]]] = {
    "max number of clients reached": errors.ConnectionError,
    "invalid password": errors.AuthenticationError,
}

LOST: Final = errors.ConnectionError("Connection to Redis lost")
#: Replies that say the server no longer serves the data: connect again elsewhere.
ELSEWHERE: Final = ("READONLY ", "UNBLOCKED ", "MOVED ")


def reply_error(message: str) -> errors.RedisError:
    """An error reply as redis-py makes it: a code it knows picks the class and is cut off."""
    code, _, rest = message.partition(" ")
    if code == "ERR":
        return _ERR.get(rest, errors.ResponseError)(rest)
    kind = _CODES.get(code)
    return errors.ResponseError(message) if kind is None else kind(rest)


def encode(args: Sequence[Any]) -> bytes:
    """One command in RESP2, with redis-py's rules for argument types.

    hiredis packs the usual arguments (str, bytes, int, float) in C, byte for byte as
    the rules below do, at a third of their cost (4.6 against 13.3 µs for an enqueue's
    13 arguments); the rest (a bytearray, or a bool or None, which are refused with
    redis-py's message) take the Python path."""
    if not args:
        raise errors.DataError("a command needs a name")
    try:
        return hiredis.pack_command(args if type(args) is tuple else tuple(args))  # type: ignore[no-any-return]
    except TypeError:
        return _encode(args)


def _encode(args: Sequence[Any]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        kind = type(arg)  # the common types first: this runs for every argument
        if kind is str:
            data = arg.encode()
        elif kind is bytes:
            data = arg
        elif kind is int:
            data = b"%d" % arg
        else:
            data = _convert(arg)
        if len(data) < 4096:
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        else:  # a large value is copied once, by the join
            parts += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(parts)


def _convert(arg: object) -> bytes:
    if isinstance(arg, float):
        return repr(arg).encode()
    if isinstance(arg, bytes | bytearray | memoryview):
        return bytes(arg)
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, int) and not isinstance(arg, bool):
        return b"%d" % arg
    raise errors.DataError(
        f"Invalid input of type: {type(arg).__name__!r}."
        " Convert to a bytes, string, int or float first."
    )


class Wire(asyncio.Protocol):
    """One open connection: the futures of its pending replies, in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        self.loop = loop
        self.timeout = math.inf if timeout is None else timeout
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(replyError=reply_error)
        self.pending: deque[_Entry] = deque()
        self.error: errors.RedisError | None = None  # set once the connection is unusable
        self.writable: asyncio.Future[None] | None = None  # while the write buffer is full
        self.closed: asyncio.Future[None] = loop.create_future()
        self.last_read = loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.moved_to: tuple[str, int] | None = None  # where a MOVED reply sent us

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        if self.timeout < math.inf:
            self.timer = self.loop.call_later(self._every(), self._watch)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        self.last_read = self.loop.time()
        pending = self.pending
        try:
            while (reply := self.reader.gets()) is not False:
                future, _, into = pending.popleft()
                if isinstance(reply, errors.ResponseError) and self.error is None:
                    self._moved(reply)
                if into is not None:
                    into.append(reply)
                    reply = into
                if future is None or future.done():  # one of many, or its caller left
                    continue
                if isinstance(reply, errors.RedisError):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # garbage, or a reply nobody asked
            self.abort(errors.ConnectionError(f"Protocol error from Redis: {exc!r}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(errors.ConnectionError(f"Connection to Redis lost: {exc or 'closed'}"))
        if self.timer is not None:
            self.timer.cancel()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def send(self, data: bytes, deadline: float, count: int | None = None) -> asyncio.Future[Any]:
        """Write one command, or ``count`` of them: the future gets the reply, or the list
        of ``count`` replies."""
        if self.error is not None or self.transport is None:
            raise type(self.error or LOST)(*(self.error or LOST).args)
        future = self.loop.create_future()
        if count is None:
            self.pending.append((future, deadline, None))
        else:
            into: list[Any] = []
            self.pending.extend((None, deadline, into) for _ in range(count - 1))
            self.pending.append((future, deadline, into))
        self.transport.write(data)
        return future

    def _moved(self, reply: errors.ResponseError) -> None:
        """After a reply that the data is served elsewhere, no new call uses this
        connection: the next one connects again, to the node a ``MOVED`` names, else to
        where ``locate`` says."""
        text = str(reply)
        if isinstance(reply, errors.ReadOnlyError) or text.startswith(ELSEWHERE):
            self.error = errors.ConnectionError(f"Redis server no longer serves the data: {text}")
            host, colon, port = text.rpartition(" ")[2].rpartition(":")
            if text.startswith("MOVED ") and colon and port.isdigit():
                self.moved_to = (host, int(port))

    def fail(self, error: errors.RedisError) -> None:
        """Mark the connection unusable and fail every pending call with ``error``."""
        if self.error is None:
            self.error = error
        while self.pending:
            future, _, _ = self.pending.popleft()
            if future is not None and not future.done():
                future.set_exception(type(error)(*error.args))
        self.resume_writing()

    def abort(self, error: errors.RedisError) -> None:
        self.fail(error)
        if self.transport is not None:
            with contextlib.suppress(RuntimeError):  # its event loop is closed already
                self.transport.abort()

    def _every(self) -> float:
        return max(0.05, min(1.0, self.timeout / 4))

    def _watch(self) -> None:
        now = self.loop.time()
        if self.pending and self.pending[0][1] < now and self.last_read + self.timeout < now:
            self.abort(errors.TimeoutError(f"Timeout reading from Redis ({self.timeout} s)"))
        else:
            self.timer = self.loop.call_later(self._every(), self._watch)
