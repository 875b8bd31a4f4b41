"""One pipelined Redis connection for the hot path: enqueue, finish, fetch.

redis-py's asyncio client checks a connection out of its pool for every call, runs the
command through its option and response-callback layers and reads the reply through a
stream reader: 250-370 µs a PING, where the bare round trip (an asyncio Protocol and
hiredis) costs 140-220 µs. A :class:`Link` is that bare round trip, on one connection that
any number of coroutines use at once: a command is encoded to RESP2 and written at once,
and since Redis answers in order, replies are matched to a deque of futures. Concurrent
callers therefore pipeline by themselves, with no pool checkout and no lock.

- An error reply raises as redis-py raises it (``NoScriptError``, ``ResponseError`` with
  the leading ``ERR`` cut off...); neither it nor a caller cancelled while it waits (its
  reply is read and dropped) puts the stream out of step.
- A lost connection fails every pending call with ``redis.exceptions.ConnectionError``;
  the next call connects again (one connect at a time, concurrent callers share it).
- One periodic timer per connection watches for a server that stopped answering: when the
  oldest pending call is past its deadline (``socket_timeout`` after it was sent, plus
  what a blocking pop such as BLPOP may wait) and nothing came for ``socket_timeout``, the
  connection is aborted and every pending call fails with ``redis.exceptions.TimeoutError``.
- While the transport's write buffer is over its high-water mark (64 KiB), new calls wait
  for it to drain before they write, so a stalled server does not grow it without bound.

A Link built from a pool that names its server with ``async locate()`` (the Sentinel and
Cluster pools of :mod:`rota.redis.topology`) asks it at every connect, and stops using a
connection whose server answered that it no longer serves the data (``READONLY`` or
``UNBLOCKED``: demoted to a replica; ``MOVED``: the slot is elsewhere): that reply is
the caller's to wait out (:mod:`rota.redis.outage`), and the next call connects to the new
primary or slot owner.

A blocking pop holds up every call sent after it: give blocking reads a Link of their own.
A Link belongs to the event loop it connected on; used on another loop, it connects again
there. Close it (``aclose``) before its loop ends, as any asyncio connection.
"""

from __future__ import annotations

import asyncio
import math
import socket
import ssl
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, Self

import redis.exceptions as errors
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from rota.wire.resp import Wire, encode

__all__ = ["Arg", "Link"]

Arg = str | bytes | int | float
_BLOCKING: Final = frozenset(
    form
    for name in ("BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BZPOPMIN", "BZPOPMAX")
    for form in (name, name.lower(), name.encode(), name.lower().encode())
)


class Link:
    """One Redis connection shared by concurrent callers; see the module's docstring.

    Build one with :meth:`from_url` or :meth:`from_redis`; it connects on its first call.
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 6379,
        *,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        socket_connect_timeout: float = 5.0,
        socket_timeout: float | None = 15.0,
        socket_keepalive: bool = True,
        client_name: str | None = None,
        locate: Callable[[], Awaitable[tuple[str, int]]] | None = None,
        lost: Callable[[tuple[str, int]], None] | None = None,
    ) -> None:
        self.host, self.port, self.path, self.db = host, port, path, db
        self.username, self.password, self.client_name = username, password, client_name
        self.ssl_context = ssl_context
        self.socket_connect_timeout = socket_connect_timeout
        self.socket_timeout = socket_timeout
        self.socket_keepalive = socket_keepalive and path is None
        self.locate = locate  # where to connect, asked at every connect (Sentinel, Cluster)
        self.lost = lost  # told the address a connect failed to reach (Cluster)
        self._conn: Wire | None = None
        self._connecting: asyncio.Task[Wire] | None = None

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Link:
        """A Link to ``url`` (``redis://``, ``rediss://``, ``unix://``), read as redis-py
        reads it; ``options`` are redis-py's connection options (socket timeouts,
        ``ssl_*``, ``client_name``...), the ones a Link has no use for are ignored."""
        options.setdefault("socket_connect_timeout", 5.0)
        options.setdefault("socket_timeout", 15.0)
        return cls.from_pool(ConnectionPool.from_url(url, **options))

    @classmethod
    def from_redis(cls, redis: Redis) -> Link:
        """A Link to the server of a redis-py client, with its credentials and timeouts.
        Raises ValueError when its connections are not plain TCP, TLS or unix ones."""
        return cls.from_pool(redis.connection_pool)

    @classmethod
    def beside(cls, redis: Redis) -> Link | None:
        """:meth:`from_redis`, or None for a client a Link cannot copy (a cluster client,
        custom connection classes, a credential provider): then redis-py serves."""
        try:
            return cls.from_redis(redis)
        except (ValueError, TypeError, AttributeError):
            return None

    @classmethod
    def from_pool(cls, pool: ConnectionPool) -> Link:
        kinds = (Connection, SSLConnection, UnixDomainSocketConnection)
        locate = getattr(pool, "locate", None)
        if pool.connection_class not in kinds and locate is None:
            raise ValueError(f"no Link for connections of class {pool.connection_class}")
        conn: Any = pool.connection_class(**pool.connection_kwargs)
        if conn.credential_provider is not None:
            raise ValueError("no Link for a credential provider")
        link = cls(
            getattr(conn, "host", "localhost"),
            getattr(conn, "port", 6379),
            path=getattr(conn, "path", None),
            db=int(conn.db or 0),
            username=conn.username,
            password=conn.password,
            ssl_context=conn.ssl_context.get() if isinstance(conn, SSLConnection) else None,
            socket_connect_timeout=conn.socket_connect_timeout or 5.0,
            socket_timeout=conn.socket_timeout,
            socket_keepalive=bool(getattr(conn, "socket_keepalive", False)),
            client_name=conn.client_name,
            locate=locate,
            lost=getattr(pool, "lost", None),
        )
        if locate is not None and hasattr(pool, "sentinel_manager"):  # see rota.redis.sentinel
            vars(pool).setdefault("links", weakref.WeakSet()).add(link)
        return link

    def __repr__(self) -> str:
        if self.locate is not None:  # Sentinel, Cluster: the pool that says where
            return f"<Link db={self.db} via {getattr(self.locate, '__self__', self.locate)!r}>"
        where = f"unix://{self.path}" if self.path else f"{self.host}:{self.port}"
        return f"<Link {where} db={self.db}>"

    async def execute_command(self, *args: Any, block: float | None = None) -> Any:
        """Send one command and return its raw reply (bytes, int, list, None). Arguments
        are bytes, str, int or float (others raise ``DataError``), as redis-py takes them.

        ``block``: seconds the server may hold the reply back (a blocking read; None:
        the timeout argument of BLPOP, BRPOP, BLMOVE, BZPOPMIN... is used by itself).
        """
        data = encode(args)
        conn = self._conn
        if (
            conn is None
            or conn.error is not None
            or conn.writable is not None
            or conn.loop is not asyncio.get_running_loop()
        ):
            conn = await self._ready()
        if block is None and args[0] in _BLOCKING:
            block = float(args[-1]) or math.inf
        return await conn.send(data, conn.loop.time() + conn.timeout + (block or 0.0))

    async def execute_many(self, commands: Iterable[Sequence[Arg]]) -> list[Any]:
        """Send many commands in one write; their replies in order, an error reply as an
        exception instance in its place (nothing is raised for those)."""
        parts = [encode(args) for args in commands]
        if not parts:
            return []
        conn = await self._ready()
        deadline = conn.loop.time() + conn.timeout
        replies: list[Any] = await conn.send(b"".join(parts), deadline, len(parts))
        return replies

    async def client_id(self) -> int:
        """This connection's id, which CLIENT UNBLOCK takes; 0 when refused (an ACL user
        without CLIENT). A reconnect changes it: ask again after an error."""
        try:
            return int(await self.execute_command("CLIENT", "ID"))
        except errors.ResponseError:
            return 0

    def drop(self, reason: str) -> None:
        """Close the connection now: the commands waiting on it fail as on a lost
        connection, and the next one connects again (asking ``locate`` where)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort(errors.ConnectionError(reason))

    async def aclose(self) -> None:
        """Close the connection; pending calls fail with ConnectionError. Safe to call
        twice; a later call connects again. A connection still being opened (for a
        caller cancelled meanwhile: the opening is shielded from it) is abandoned and
        closed too, not left to land after this returns."""
        task, self._connecting = self._connecting, None
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.wait([task])
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort(errors.ConnectionError("Redis link closed"))
            if conn.loop is asyncio.get_running_loop() and conn.transport is not None:
                await asyncio.shield(conn.closed)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _ready(self) -> Wire:
        """The open connection of this loop, once its write buffer has room."""
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is None or conn.error is not None or conn.loop is not loop:
            task = self._connecting
            if task is None or task.done() or task.get_loop() is not loop:
                task = self._connecting = loop.create_task(self._open(loop))
                # Its callers may all be cancelled while it runs (a task group giving up
                # on a shard): its failure is then heard by nobody, and is not news.
                task.add_done_callback(_heard)
            conn = await asyncio.shield(task)
        while conn.writable is not None:
            await asyncio.shield(conn.writable)
        if conn.error is not None:
            raise type(conn.error)(*conn.error.args)
        return conn

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> Wire:
        """The socket: a unix socket or TCP (with TLS and keepalive as configured)."""
        if self.path:
            _, conn = await loop.create_unix_connection(
                lambda: Wire(loop, self.socket_timeout), self.path
            )
            return conn
        _, conn = await loop.create_connection(
            lambda: Wire(loop, self.socket_timeout), self.host, self.port, ssl=self.ssl_context
        )
        sock = conn.transport.get_extra_info("socket") if conn.transport else None
        if self.socket_keepalive and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return conn

    async def _hello(self, conn: Wire) -> None:
        """AUTH, SELECT and CLIENT SETNAME as configured, in one write; an error reply
        raises."""
        hello: list[list[Arg]] = []
        if self.password:
            hello.append(["AUTH", *([self.username] if self.username else []), self.password])
        if self.db:
            hello.append(["SELECT", self.db])
        if self.client_name:
            hello.append(["CLIENT", "SETNAME", self.client_name])
        if hello:
            data = b"".join(encode(c) for c in hello)
            for reply in await conn.send(data, math.inf, len(hello)):
                if isinstance(reply, errors.RedisError):
                    raise reply

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Wire:
        old, self._conn = self._conn, None
        if old is not None:  # broken, or of another event loop
            old.abort(errors.ConnectionError("Redis link reconnected"))
        where = f"unix socket {self.path}" if self.path else f"{self.host}:{self.port}"
        conn: Wire | None = None
        try:
            if old is not None and old.moved_to is not None and self.locate is not None:
                self.host, self.port = old.moved_to
                where = f"{self.host}:{self.port}"
            elif self.locate is not None:
                self.host, self.port = await self.locate()
                where = f"{self.host}:{self.port}"
            async with asyncio.timeout(self.socket_connect_timeout):
                conn = await self._connect(loop)
                await self._hello(conn)
        except BaseException as exc:
            if conn is not None:
                conn.abort(errors.ConnectionError("Redis handshake failed"))
            if self.lost is not None and isinstance(exc, OSError | TimeoutError):
                self.lost((self.host, self.port))
            if isinstance(exc, TimeoutError):
                raise errors.TimeoutError(f"Timeout connecting to Redis at {where}") from None
            if isinstance(exc, OSError):
                raise errors.ConnectionError(
                    f"Error connecting to Redis at {where}: {exc}"
                ) from exc
            raise
        self._conn = conn
        return conn


def _heard(task: asyncio.Task[Wire]) -> None:
    """Mark an open's failure as read, so that asyncio does not print it when no caller
    is left to await it (each caller still gets it through its own ``await``)."""
    if not task.cancelled():
        task.exception()
