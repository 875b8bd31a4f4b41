"""What a handler sees of its job and its pool."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from rota.client import Client, Enqueued
from rota.protocol.rows import MAX_LOG
from rota.redis.outage import MEANING, condition, rota_error

if TYPE_CHECKING:
    from rota.worker.runtime import PoolRuntime

__all__ = ["JobContext"]

_MAX_LOG_LINES = 100
_MAX_LOG_LINE = MAX_LOG


class JobContext:
    """One attempt of one job: its identity, the pool's shared state, and a few calls.

    ``state`` is what the pool's lifespan yielded (database pools, HTTP clients).
    """

    __slots__ = (
        "_logger",
        "_runtime",
        "args",
        "attempt",
        "enqueued_at",
        "id",
        "name",
        "parent_results",
        "started_at",
        "token",
    )

    def __init__(
        self,
        runtime: PoolRuntime,
        *,
        id: str,
        name: str,
        args: list[Any] | dict[str, Any],
        attempt: int,
        token: str,
        enqueued_at: float,
        started_at: float,
        parent_results: Mapping[str, Any] | None = None,
    ) -> None:
        self._runtime = runtime
        self.id = id
        self.name = name
        self.args = args
        self.attempt = attempt
        self.token = token
        self.enqueued_at = enqueued_at
        self.started_at = started_at
        #: The results of the jobs this one was enqueued after (``after=``, a chain's
        #: previous step, a group's members for its callback), by job id; ``None``
        #: for a job that returned nothing. Empty for a job that waited for nothing.
        self.parent_results: Mapping[str, Any] = parent_results or {}
        self._logger: Any = None

    @property
    def logger(self) -> Any:
        """A structlog logger bound to this job (made on first use)."""
        if self._logger is None:
            self._logger = structlog.get_logger("rota.job").bind(job_id=self.id, job_name=self.name)
        return self._logger

    @property
    def state(self) -> Mapping[str, Any]:
        return self._runtime.state

    @property
    def client(self) -> Client:
        """The client of the pool's namespace (every shard of it)."""
        return self._runtime.client

    @property
    def shutting_down(self) -> bool:
        return self._runtime.stopping.is_set()

    @property
    def cancel_reason(self) -> str | None:
        """Why the attempt is being cancelled: ``"timeout"`` (its deadline passed),
        ``"idle"`` (no checkin nor progress for the handler's ``idle_timeout``),
        ``"abort"`` (``client.abort``), ``"shutdown"`` (the pool stops), ``"left"`` (a
        second signal leaves the handler's thread running), or None. The
        handler's await is cancelled in each case; middleware reads this (in a
        ``finally``, or an ``except asyncio.CancelledError`` that re-raises) to tell them
        apart."""
        entry = self._runtime.in_flight.get(self.id)
        return None if entry is None else entry.reason

    async def checkin(self, message: str = "") -> bool:
        """Tell the pool this job is alive (extends its lease, and starts the handler's
        ``idle_timeout`` again) and what it is doing.

        Returns True when the pool is shutting down, so a long job can stop early and
        raise :class:`rota.Retry` to continue later.
        """
        await self._unless_refused("checkin", self._runtime.checkin(self, message))
        return self.shutting_down

    async def progress(self, percent: float, message: str = "") -> None:
        """Record how far the job is (0-100), readable with ``client.job(id).progress``;
        a sign of life too: the handler's ``idle_timeout`` starts again."""
        text = f"{max(0.0, min(100.0, float(percent))):g}"
        if message:
            text += " " + message[:_MAX_LOG_LINE]
        self._runtime.heard(self.id)  # a sign of life: the idle clock starts again
        here = self._runtime.shard  # the job's shard
        write = here.redis.hset(here.keys.job(self.id), "progress", text)
        await self._unless_refused("progress", write)

    async def job_log(self, message: str) -> None:
        """Keep a line in the job's own log (the last 100 are kept, and expire with the
        job; ``client.job_log(id)``, the job page and ``rota job show`` read them). For
        the process's log, use :attr:`logger`."""
        here = self._runtime.shard  # the job's shard
        key = here.keys.joblog(self.id)
        async with here.redis.pipeline(transaction=False) as pipe:
            pipe.rpush(key, message[:_MAX_LOG_LINE])
            pipe.ltrim(key, -_MAX_LOG_LINES, -1)
            # The finish expires the lines with the job only when told they exist.
            pipe.hset(here.keys.job(self.id), "logged", "1")
            await self._unless_refused("log", pipe.execute())

    async def _unless_refused(self, what: str, write: Awaitable[Any]) -> None:
        """A write the job does not depend on: when Redis says "not now" (full, a
        replica, away) it is skipped instead of failing the job. The heartbeat extends
        the lease anyway; the pool's own tasks tell the operator about the condition.
        Any other refusal reaches the handler as rota's error, not redis-py's."""
        try:
            await write
        except Exception as exc:
            cond = condition(exc)
            if cond is None:
                mine = rota_error(exc)
                if mine is exc:
                    raise
                raise mine from exc
            self.logger.debug("job write skipped", write=what, why=MEANING[cond])

    async def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Enqueued:
        """Enqueue another job in the same namespace."""
        return await self.client.enqueue(name, *args, **kwargs)
