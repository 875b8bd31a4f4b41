"""One way to send the hot path's commands, whichever connection carries them.

The enqueue, the fetcher, the acker and the reading of a job's parent results send
through a :class:`Conn`: a :class:`~rota.wire.link.Link` where one can be made (plain
TCP, TLS, a unix socket, the primary a Sentinel names, the node that owns a namespace's
slot), else :class:`RedisPyConn` over the redis-py client itself (a cluster client,
custom connection classes, a credential provider). The choice is made once, by
:func:`hot_path`, so the call sites hold no branch on the kind of connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from rota.wire.link import Arg, Link

__all__ = ["Conn", "RedisPyConn", "block_within", "hash_pairs", "hot_path", "score_pairs"]


class Conn(Protocol):
    async def execute_command(self, *args: Arg) -> Any:
        """One command; an error reply raises."""
        ...

    async def execute_many(self, commands: Iterable[Sequence[Arg]]) -> list[Any]:
        """Commands in order, without MULTI: their replies, an error reply as an
        exception instance in its place."""
        ...

    async def client_id(self) -> int:
        """The id (CLIENT ID) of the one connection the commands use, for CLIENT
        UNBLOCK; 0 when there is no such connection or the server refused."""
        ...

    async def aclose(self) -> None: ...


class RedisPyConn:
    """A redis-py client as a :class:`Conn`. Its commands go through its connection
    pool, and replies come as redis-py shapes them (``HGETALL`` as a dict)."""

    __slots__ = ("redis",)

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def execute_command(self, *args: Arg) -> Any:
        return await self.redis.execute_command(*args)  # type: ignore[no-untyped-call]

    async def execute_many(self, commands: Iterable[Sequence[Arg]]) -> list[Any]:
        if self.redis.single_connection_client:
            # redis-py's pipeline takes a connection from the pool, not the client's own:
            # a caller that WAITs for replicas on this connection needs its writes here.
            return [await self._one(command) for command in commands]
        pipe = self.redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def _one(self, command: Sequence[Arg]) -> Any:
        try:
            return await self.execute_command(*command)
        except ResponseError as exc:  # in its place, as a pipeline leaves it
            return exc

    async def client_id(self) -> int:
        return 0  # a pool's connections change from call to call: nothing to unblock

    async def aclose(self) -> None:
        return None  # the pool belongs to the redis-py client


def hot_path(redis: Redis) -> Conn:
    """A Link to the server of ``redis`` (same credentials, TLS and timeouts), or the
    client itself where a Link cannot copy its connections."""
    return Link.beside(redis) or RedisPyConn(redis)


def block_within(via: object, seconds: float) -> float:
    """How long a blocking pop (``BLPOP``) asked to wait ``seconds`` may wait ``via`` a
    connection: a Link extends a blocking pop's deadline by its wait, but redis-py times
    a read out after ``socket_timeout`` whatever the command (a cluster's and a
    sentinel's connections are redis-py's), so there a second less than that at most.
    A shorter wait only times out sooner, and the caller waits again."""
    redis = via.redis if isinstance(via, RedisPyConn) else via
    if not isinstance(redis, Redis):
        return seconds
    timeout = redis.connection_pool.connection_kwargs.get("socket_timeout")
    if not isinstance(timeout, int | float) or timeout <= 0:
        return seconds
    # Never under 10 ms: Redis reads a BLPOP timeout that rounds to 0 ms as 'forever'.
    return min(seconds, max(timeout - 1, timeout / 2, 0.01))


def hash_pairs(reply: Any) -> Iterable[tuple[Any, Any]]:
    """An HGETALL reply as (field, value) pairs, as either connection answers it: a dict
    from redis-py, the flat list of the wire from a Link."""
    return reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)


def score_pairs(reply: Any) -> list[tuple[Any, Any]]:
    """A ``WITHSCORES`` reply as (member, score) pairs, flat (RESP2) or in pairs (RESP3);
    an error reply (a key of another type, in a pipeline's replies) is raised."""
    if isinstance(reply, Exception):
        raise reply
    items = list(reply)
    if items and isinstance(items[0], list | tuple):
        return [(member, score) for member, score in items]
    return list(zip(items[::2], items[1::2], strict=True))
