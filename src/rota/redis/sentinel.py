"""Sentinel: the primary the sentinels name, and leaving the old one the moment they
name a new one.

:class:`SentinelPool` is redis-py's pool of the primary with two changes. It asks every
sentinel at once and believes the one whose configuration is newest (highest
``config-epoch``), where redis-py believes the first that answers: after a failover the
sentinels learn of it one after another, within about a second, and one not yet told
would send a pool back to the old primary.

A connection under Sentinel asks for the primary when it opens, and drops itself when its
server answers ``READONLY``. That is enough when the primary dies (every connection breaks
and opens again), but not when it is still up: after ``SENTINEL FAILOVER`` (a planned
switch) or a partition that healed, the old primary keeps taking writes from the
connections it has until a sentinel converts it to a replica, up to ten seconds later
(the sentinels look at it every ten seconds), and converting it discards every one of
those writes. A pool working there runs jobs whose outcomes are then lost (they run
again), and a producer's enqueues are lost.

:func:`follow_primary` listens on every sentinel for ``+switch-master`` and, the moment one
names a new address for the service, closes every connection of the client (the pooled
ones, those in use, the pipelined links made beside it): each command from then on goes
to the new primary, and the pool's tasks, which see their connection lost, are told to
try again as soon as it answers. It is a task of the pool and of the web UI; a long-lived
producer under Sentinel runs it too (``tg.start_soon(client.follow_primary)``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, Final

import anyio
import redis.exceptions as errors
import structlog
from redis.asyncio import Redis
from redis.asyncio.sentinel import MasterNotFoundError, SentinelConnectionPool

__all__ = ["SWITCH_CHANNEL", "SentinelPool", "follow_primary"]

log = structlog.get_logger("rota.redis")

#: The channel on which a sentinel announces ``<service> <old ip> <old port> <new ip> <new port>``.
SWITCH_CHANNEL: Final = "+switch-master"


class SentinelPool(SentinelConnectionPool):
    """redis-py's pool of the Sentinel primary, with the ``locate`` a Link uses; see the
    module's docstring."""

    links: weakref.WeakSet[Any]  # the Links made beside this pool: they leave with it

    async def locate(self) -> tuple[str, int]:
        host, port = await self.get_master_address()
        return str(host), int(port)

    async def get_master_address(self) -> tuple[str, int]:
        address = await self._newest_primary()
        if self.is_master and self.master_address != address:
            self.master_address = address
            await self.disconnect(inuse_connections=False)  # idle ones reconnect there
        return address

    async def _newest_primary(self) -> tuple[str, int]:
        """The primary as the sentinel with the newest configuration names it. Every
        sentinel is asked at once and each answer awaited (none is cancelled halfway,
        which would leave its connection open): a sentinel that is down costs what it
        costs redis-py, its connect timeout, and only when it does not refuse at once."""
        replies = await asyncio.gather(*(self._ask(s) for s in self.sentinel_manager.sentinels))
        answers = [a for a in replies if a is not None]
        if not answers:
            raise MasterNotFoundError(f"no sentinel names a primary for {self.service_name!r}")
        _, host, port = max(answers)
        return host, port

    async def _ask(self, sentinel: Redis) -> tuple[int, str, int] | None:
        try:
            state: dict[str, Any] = await sentinel.sentinel_master(self.service_name)  # type: ignore[assignment]
        except (errors.RedisError, OSError):
            return None
        if not state or not self.sentinel_manager.check_master_state(state, self.service_name):
            return None
        return int(state.get("config-epoch", 0)), str(state["ip"]), int(state["port"])

    async def leave_primary(self) -> None:
        """Close every connection to the primary, those in use and the Links' too (their
        commands fail as on a lost connection), but none to the sentinels."""
        await super().disconnect(inuse_connections=True)
        for link in list(getattr(self, "links", ())):
            link.drop("the sentinels named a new primary")

    async def disconnect(self, inuse_connections: bool = True) -> None:
        """Close the connections, and when the client closes (every connection) the
        ones to the sentinels too."""
        await super().disconnect(inuse_connections)
        if inuse_connections:
            for sentinel in self.sentinel_manager.sentinels:
                await sentinel.connection_pool.disconnect()


async def follow_primary(redis: Redis, on_switch: Callable[[], None] = lambda: None) -> None:
    """Until cancelled: whenever a sentinel announces a new primary for ``redis``'s
    service, close ``redis``'s connections and call ``on_switch`` (which closes the
    other connections the caller holds). Returns at once when ``redis`` is not a
    Sentinel client."""
    pool = redis.connection_pool
    if not isinstance(pool, SentinelPool):
        return
    state = _Switches(redis, pool, on_switch)
    async with anyio.create_task_group() as tg:
        for sentinel in pool.sentinel_manager.sentinels:
            tg.start_soon(state.listen, sentinel)


class _Switches:
    """The switches seen so far: every sentinel announces the same one, acted on once."""

    def __init__(self, redis: Redis, pool: SentinelPool, on_switch: Callable[[], None]) -> None:
        self.redis = redis
        self.pool = pool
        self.on_switch = on_switch
        self.primary: tuple[str, int] | None = None

    async def listen(self, sentinel: Redis) -> None:
        failures = 0
        while True:
            pubsub = sentinel.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(SWITCH_CHANNEL)
                failures = 0
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is not None:
                        await self.switched(message["data"])
            except (errors.RedisError, OSError):
                # A sentinel that is down or restarting: the others still tell.
                failures += 1
                await anyio.sleep(min(5.0, 0.1 * 2**failures))
            finally:
                with anyio.CancelScope(shield=True):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def switched(self, data: bytes | str) -> None:
        text = data.decode() if isinstance(data, bytes) else str(data)
        parts = text.split()
        if len(parts) != 5 or parts[0] != self.pool.service_name:
            return
        new = (parts[3], int(parts[4]))
        if new == self.primary:
            return
        self.primary = new
        log.warning(
            "the sentinels named a new primary: every connection moves to it",
            service=parts[0],
            old=f"{parts[1]}:{parts[2]}",
            new=f"{parts[3]}:{parts[4]}",
        )
        await self.pool.leave_primary()
        # The tasks whose connections closed wait before they try again: once the new
        # primary answers, they are told to try now.
        with anyio.move_on_after(1):
            while True:
                try:
                    await self.redis.ping()
                    break
                except (errors.RedisError, OSError):
                    await anyio.sleep(0.02)
        self.on_switch()
