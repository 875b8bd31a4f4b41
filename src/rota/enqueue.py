"""Enqueueing: a job checked into its row and sent to its shard, one job by the
``enqueue`` script and more in ``enqueue_batch`` calls of one pipeline; waiting for
replicas (``durable``); and riding out a Redis that is away for a while
(``ride_through``): the same rows sent again enqueue none twice.

:class:`Enqueueing` is a base of :class:`rota.Client`, which provides what is declared
here; the workflows (chains, groups: :mod:`rota.workflow`) enqueue through it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import Any, TypeVar

import anyio

from rota import tracing
from rota.errors import JobNotFound, NotReplicated, RedisUnavailable
from rota.protocol import calls
from rota.protocol.calls import Scope
from rota.protocol.rows import EnqueueRow
from rota.protocol.shards import place, shard_of_row
from rota.redis.outage import MEANING, Condition, backoff, condition, refused
from rota.redis.topology import wait_replicas
from rota.scripted import Scripted
from rota.shard_rules import gather
from rota.spec import Enqueued, JobSpec, delay_seconds, moment_seconds, to_row
from rota.wire.conn import RedisPyConn
from rota.wire.redispy import Redis, ReplyError

__all__ = ["PLACED", "Enqueueing", "durable_enqueue"]

T = TypeVar("T")

#: The shards of jobs a caller found before it enqueues jobs after them (a chain after
#: a job whose chosen id names another shard than its own): see ``_routed``.
PLACED: ContextVar[Mapping[str, int] | None] = ContextVar("rota_placed", default=None)

#: Conditions an enqueue does not ride through: they last until an operator acts.
_LASTING = (Condition.OUT_OF_MEMORY, Condition.MISCONF)


class Enqueueing(Scripted):
    """The enqueue of :class:`rota.Client` (see the module)."""

    #: The client of shard 0, which routes; the client of each shard (see rota.sharding).
    root: Enqueueing
    parts: tuple[Enqueueing, ...]
    shard_count: int
    #: Script calls over the hot path's connection.
    hot: Scope
    max_args_bytes: int
    unique_ttl: float
    durable: int
    durable_timeout: float
    ride_through: float
    _reached: bool  # whether an enqueue ever got through (see _riding)

    async def enqueue(
        self,
        name: str,
        /,
        *args: Any,
        unique: str | None = None,
        unique_ttl: float | None = None,
        job_id: str | None = None,
        max_fails: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the job's timeout, not this call's
        after: Sequence[str] = (),
        durable: bool | int | None = None,
        **kwargs: Any,
    ) -> Enqueued:
        """Enqueue a job now. Keyword arguments other than the options are the job's args.

        ``unique``: while a live job holds this key, enqueue nothing and return the
        holder. ``job_id``: use this id; if it exists, enqueue nothing. ``after``: ids
        of jobs that must complete first; the job waits (state ``waiting``) until the
        last of them completes, and ends dead (``dependency_failed``) if one ends dead or
        aborted; a parent that does not exist raises :class:`~rota.JobNotFound`.
        ``durable``: see :meth:`enqueue_many`. Handlers whose parameters share an
        option's name are enqueued with :class:`JobSpec`.
        """
        spec = JobSpec(
            name=name,
            args=args,
            kwargs=kwargs,
            unique=unique,
            unique_ttl=unique_ttl,
            job_id=job_id,
            max_fails=max_fails,
            timeout=timeout,
            after=tuple(after),
        )
        return (await self.enqueue_many([spec], durable=durable))[0]

    async def enqueue_in(self, delay: float, name: str, /, *args: Any, **kwargs: Any) -> Enqueued:
        """Enqueue a job to run ``delay`` seconds from now."""
        return await self._enqueue_scheduled(
            time.time() + delay_seconds("delay", delay), name, args, kwargs
        )

    async def enqueue_at(
        self, when: datetime | float, name: str, /, *args: Any, **kwargs: Any
    ) -> Enqueued:
        """Enqueue a job to run at ``when``: a datetime (a naive one is UTC, as everywhere
        in rota) or epoch seconds."""
        at = moment_seconds("when", when) if isinstance(when, datetime) else float(when)
        return await self._enqueue_scheduled(at, name, args, kwargs)

    async def _enqueue_scheduled(
        self, at: float, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Enqueued:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
        if "after" in options:
            options["after"] = tuple(options["after"])
        spec = JobSpec(name=name, args=args, kwargs=kwargs, run_at=at, **options)
        return (await self.enqueue_many([spec]))[0]

    async def enqueue_many(
        self, specs: Iterable[JobSpec], *, durable: bool | int | None = None
    ) -> list[Enqueued]:
        """Enqueue many jobs in one round trip; each is enqueued atomically on its own.

        A single job goes through the ``enqueue`` script; more go through
        ``enqueue_batch``, 50 jobs per call, every call in one pipeline.

        ``durable`` (default: the client's ``durable``, the setting ``durable_enqueue``):
        return only once that many replicas (True: one) hold the jobs, by ``WAIT`` on the
        connection that wrote them; fewer within ``durable_timeout`` seconds raise
        :class:`~rota.NotReplicated` (the jobs are written on the primary; a failover may
        lose them). See "Failover: what can be lost" in docs/operations.md.

        A Redis that is away or refusing ("not now": a restart, a failover, a slot move,
        out of memory) is ridden through for ``ride_through`` seconds (the setting): the
        same jobs are sent again, which enqueues none twice (an id that exists enqueues
        nothing; such a job then reads ``created=False``). After that the call raises
        :class:`~rota.RedisUnavailable` or :class:`~rota.RedisRefused`.
        """
        if self.root is not self:  # a part of a sharded client: the root routes
            return await self.root.enqueue_many(specs, durable=durable)
        rows = [self._enqueue_args(spec) for spec in specs]
        replicas = self.durable if durable is None else int(durable)
        try:  # the usual case, without a wrapper: it gets through at once
            if replicas <= 0 or not rows:
                jobs = await self._enqueue_rows(rows)
            else:
                jobs = await self._durable(rows, replicas)
        except Exception as exc:
            if replicas <= 0 or not rows:
                return await self._riding(lambda: self._enqueue_rows(rows), exc)
            return await self._riding(lambda: self._durable(rows, replicas), exc)
        self._reached = True
        return jobs

    async def _durable(self, rows: list[EnqueueRow], replicas: int) -> list[Enqueued]:
        if self.shard_count == 1:
            return await durable_enqueue(self, rows, replicas)
        return await self._routed(rows, lambda part, sub: durable_enqueue(part, sub, replicas))

    async def _routed(
        self,
        rows: list[EnqueueRow],
        send: Callable[[Enqueueing, list[EnqueueRow]], Awaitable[list[Enqueued]]],
    ) -> list[Enqueued]:
        """Send each row to its shard (see :mod:`rota.protocol.shards`), every shard's
        rows at once, and answer in the rows' order. A row after another of the same
        call goes where that one goes (its chosen id may name another shard)."""
        k = self.shard_count
        by_shard: dict[int, list[int]] = {}
        went = dict(PLACED.get() or {})  # the shard of each row so far (and known), by id
        for i, row in enumerate(rows):
            went[row.id] = shard = shard_of_row(row, k, went)
            by_shard.setdefault(shard, []).append(i)
        sent = await gather(
            [
                functools.partial(send, self.parts[shard], [rows[i] for i in index])
                for shard, index in by_shard.items()
            ]
        )
        placed = {
            i: job
            for index, jobs in zip(by_shard.values(), sent, strict=True)
            for i, job in zip(index, jobs, strict=True)
        }
        return [placed[i] for i in range(len(rows))]

    async def _riding(self, send: Callable[[], Awaitable[T]], first: Exception) -> T:
        """``send`` again until it gets through, after it failed with ``first``, waiting
        out passing conditions for ``ride_through`` seconds. A full Redis (or one that
        cannot save) is no passing condition: it raises at once, as does a client that
        never reached Redis (a wrong URL is not an outage)."""
        deadline = time.monotonic() + (self.ride_through if self._reached else 0)
        exc, failures = first, 0
        while True:
            failures += 1
            await anyio.sleep(self._ride_delay(exc, deadline, failures))
            try:
                result = await send()
            except Exception as again:
                exc = again
            else:
                self._reached = True
                return result

    def _ride_delay(self, exc: Exception, deadline: float, failures: int) -> float:
        """How long to wait before sending again after ``exc``; raises what cannot be
        ridden through, or :class:`~rota.RedisUnavailable` once ``deadline`` passed."""
        cond = condition(exc)
        left = deadline - time.monotonic()
        if cond is None or cond in _LASTING:
            raise exc
        if left <= 0:
            if cond is Condition.UNREACHABLE:
                raise RedisUnavailable(
                    f"{MEANING[cond]} for {self.ride_through} s (ride_through):"
                    f" not enqueued ({exc})"
                ) from exc
            raise exc
        return min(backoff(failures, cond), left)

    async def _enqueue_rows(
        self, rows: list[EnqueueRow], conn: Redis | None = None
    ) -> list[Enqueued]:
        """Send rows of :meth:`_enqueue_args` in one ``send`` span when tracing is on
        (see :mod:`rota.tracing`), its trace context stored in every job."""
        if not (rows and tracing.active()):
            return await self._send_rows(rows, conn)
        names = {r.name for r in rows}
        with tracing.producer_span(names.pop() if len(names) == 1 else "", len(rows)) as trace:
            if trace[0]:
                rows = [r._replace(traceparent=trace[0], tracestate=trace[1]) for r in rows]
            return await self._send_rows(rows, conn)

    async def _send_rows(self, rows: list[EnqueueRow], conn: Redis | None = None) -> list[Enqueued]:
        """Send rows to their shards (over ``conn`` when given: rows of this one)."""
        if conn is None and self.shard_count > 1:
            return await self.root._routed(rows, Enqueueing._send_here)
        return await self._send_here(rows, conn)

    async def _send_here(self, rows: list[EnqueueRow], conn: Redis | None = None) -> list[Enqueued]:
        """Send rows to this shard: one by the ``enqueue`` script, more (or one of a
        group) by ``enqueue_batch`` calls, all in one pipeline, in order."""
        scope = self.hot if conn is None else self.scope.on(RedisPyConn(conn))
        if len(rows) <= 1 and not (rows and (rows[0].group or rows[0].waits_group)):
            if not rows:
                return []
            try:
                job_id, created = await calls.enqueue(scope, rows[0])
            except ReplyError as exc:
                raise _enqueue_error(exc, "the job was not enqueued", 0) from exc
            return [Enqueued(job_id, rows[0].name, created)]
        jobs, failed = await calls.enqueue_batch(scope, rows)
        if failed is not None:  # every call is atomic: all of its jobs or none
            what = f"{len(jobs)} of {len(rows)} jobs of the batch were written"
            raise _enqueue_error(failed, what, len(jobs)) from failed
        return [Enqueued(i, row.name, c) for (i, c), row in zip(jobs, rows, strict=True)]

    def _enqueue_args(
        self, spec: JobSpec, group: str = "", waits_group: str = "", group_size: int = 0
    ) -> EnqueueRow:
        """The row of one job, checked (see :func:`rota.spec.to_row`); over several
        shards, with an id that names the shard it is routed to, unless it has one."""
        row = to_row(spec, self.max_args_bytes, self.unique_ttl, group, waits_group, group_size)
        if self.shard_count > 1 and spec.job_id is None:
            return place(row, self.shard_count)
        return row


async def durable_enqueue(
    client: Enqueueing, rows: list[EnqueueRow], replicas: int
) -> list[Enqueued]:
    """Write ``rows`` and ``WAIT`` for ``replicas`` on one connection of the redis-py
    pool (not the shared Link: ``WAIT`` counts the writes of its connection and holds
    the connection until the replicas answer).

    A socket timeout at or below ``durable_timeout`` would end a ``WAIT`` that is only
    slow as a lost connection (a ``TimeoutError``, not :class:`NotReplicated`): that is
    refused before anything is written."""
    sock = client.redis.connection_pool.connection_kwargs.get("socket_timeout")
    if sock is not None and sock <= client.durable_timeout:
        raise ValueError(
            f"durable_timeout ({client.durable_timeout:g} s) must be below the"
            f" connection's socket_timeout ({sock:g} s): a WAIT for replicas that takes"
            " its whole time would read as a lost connection. Lower durable_timeout or"
            " raise socket_timeout."
        )
    async with client.redis.client() as one:
        jobs = await client._enqueue_rows(rows, one)
        acked = await wait_replicas(one, replicas, client.durable_timeout)
    if acked < replicas:
        raise NotReplicated(
            f"{len(jobs)} job(s) written on the primary, but {acked} of {replicas} replica(s)"
            f" acknowledged within {client.durable_timeout} s: a failover now may lose them",
            jobs,
            acked,
            replicas,
        )
    return jobs


_OPTIONS = frozenset({"unique", "unique_ttl", "job_id", "max_fails", "timeout", "after"})


def _enqueue_error(exc: BaseException, what: str, written: int) -> BaseException:
    """What an enqueue raises for an error reply: a parent that does not exist is
    :class:`~rota.JobNotFound`, a refusal :class:`~rota.RedisRefused`."""
    text = str(exc)
    if text.startswith("NOPARENT "):
        return JobNotFound(text.removeprefix("NOPARENT ").split(" script:", 1)[0])
    if text.startswith("GROUPMISMATCH "):
        return ValueError(text.removeprefix("GROUPMISMATCH ").split(" script:", 1)[0])
    return refused(exc, what, written) or exc
