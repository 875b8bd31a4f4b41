"""What an enqueue does besides sending rows to their shards (``Shards.by_key``,
``Shard.send``): waiting for replicas (``durable``), riding out a Redis that is away for
a while (``ride_through``: the same rows sent again enqueue none twice), and the
producer's trace span. :class:`rota.Client` composes these."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from rota import tracing
from rota.client.shard import Shard
from rota.client.spec import Enqueued
from rota.errors import NotReplicated, RedisUnavailable
from rota.protocol.rows import EnqueueRow
from rota.redis.outage import MEANING, Condition, backoff, condition
from rota.redis.topology import wait_replicas
from rota.wire.redispy import Redis

__all__ = ["durable_send", "riding", "traced"]

T = TypeVar("T")

#: Conditions an enqueue does not ride through: they last until an operator acts.
_LASTING = (Condition.OUT_OF_MEMORY, Condition.MISCONF)


async def traced(shard: Shard, rows: list[EnqueueRow], conn: Redis | None = None) -> list[Enqueued]:
    """Send rows to ``shard`` in one ``send`` span when tracing is on (see
    :mod:`rota.tracing`), its trace context stored in every job."""
    if not (rows and tracing.active()):
        return await shard.send(rows, conn)
    names = {r.name for r in rows}
    with tracing.producer_span(names.pop() if len(names) == 1 else "", len(rows)) as trace:
        if trace[0]:
            rows = [r._replace(traceparent=trace[0], tracestate=trace[1]) for r in rows]
        return await shard.send(rows, conn)


async def durable_send(
    shard: Shard, rows: list[EnqueueRow], replicas: int, within: float
) -> list[Enqueued]:
    """Write ``rows`` and ``WAIT`` for ``replicas`` on one connection of the redis-py
    pool (not the shared Link: ``WAIT`` counts the writes of its connection and holds
    the connection until the replicas answer).

    A socket timeout at or below ``within`` (``durable_timeout``) would end a ``WAIT``
    that is only slow as a lost connection (a ``TimeoutError``, not
    :class:`NotReplicated`): that is refused before anything is written."""
    sock = shard.redis.connection_pool.connection_kwargs.get("socket_timeout")
    if sock is not None and sock <= within:
        raise ValueError(
            f"durable_timeout ({within:g} s) must be below the"
            f" connection's socket_timeout ({sock:g} s): a WAIT for replicas that takes"
            " its whole time would read as a lost connection. Lower durable_timeout or"
            " raise socket_timeout."
        )
    async with shard.redis.client() as one:
        jobs = await traced(shard, rows, one)
        acked = await wait_replicas(one, replicas, within)
    if acked < replicas:
        raise NotReplicated(
            f"{len(jobs)} job(s) written on the primary, but {acked} of {replicas} replica(s)"
            f" acknowledged within {within} s: a failover now may lose them",
            jobs,
            acked,
            replicas,
        )
    return jobs


async def riding(
    send: Callable[[], Awaitable[T]], first: Exception, ride_through: float, *, reached: bool
) -> T:
    """``send`` again until it gets through, after it failed with ``first``, waiting
    out passing conditions for ``ride_through`` seconds. A full Redis (or one that
    cannot save) is no passing condition: it raises at once, as does a client that never
    ``reached`` Redis (a wrong URL is not an outage)."""
    deadline = time.monotonic() + (ride_through if reached else 0)
    exc, failures = first, 0
    while True:
        failures += 1
        await anyio.sleep(_ride_delay(exc, deadline, failures, ride_through))
        try:
            return await send()
        except Exception as again:
            exc = again


def _ride_delay(exc: Exception, deadline: float, failures: int, ride_through: float) -> float:
    """How long to wait before sending again after ``exc``; raises what cannot be
    ridden through, or :class:`~rota.RedisUnavailable` once ``deadline`` passed."""
    cond = condition(exc)
    left = deadline - time.monotonic()
    if cond is None or cond in _LASTING:
        raise exc
    if left <= 0:
        if cond is Condition.UNREACHABLE:
            raise RedisUnavailable(
                f"{MEANING[cond]} for {ride_through} s (ride_through): not enqueued ({exc})"
            ) from exc
        raise exc
    return min(backoff(failures, cond), left)
