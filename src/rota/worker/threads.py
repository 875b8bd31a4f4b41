"""The threads that run plain ``def`` handlers, and what a stopping pool does with them.

A thread cannot be cancelled. Had a stopping pool put back the job of a handler thread
still running when ``grace`` ends, another pool could start it while the first thread
still ran it. So the drain (:mod:`rota.worker.run`) cancels what runs on the event loop
and waits for the handler threads: the heartbeat goes on extending their jobs' leases,
and each job records its real outcome when its thread ends. A second signal ends the
wait: those jobs are left to their leases (another pool runs them again once they
expire), and the daemon exits without waiting for the threads
(:func:`rota.daemon.run_pool`); the interpreter would otherwise wait for them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from rota.protocol.job import now_ms
from rota.protocol.rows import Fetched

__all__ = ["HOLDING", "HOLD_REPORT", "LEFT", "Attempt", "HandlerThreads", "job_fields"]

T = TypeVar("T")

#: How often a pool that waits for handler threads says again which jobs hold it (s).
HOLD_REPORT = 60.0
HOLDING = (
    "handler threads outlive grace (a thread cannot be cancelled): the pool waits for"
    " them and keeps their jobs' leases; SIGTERM or SIGINT again (or SIGKILL) stops it"
    " now, and their jobs run again once their leases expire"
)
LEFT = (
    "second signal: handler threads left running; their jobs are not put back, they run"
    " again once their leases expire"
)


class Attempt(Protocol):
    """What is read here of an attempt in flight (rota.worker.runtime.InFlight)."""

    @property
    def job(self) -> Fetched: ...
    @property
    def since(self) -> int: ...
    def cancel(self, reason: str) -> None: ...


def job_fields(job: Fetched, seconds: float) -> dict[str, Any]:
    """A job as a log line lists it: its id, its name, and how long it has run."""
    return {"job_id": job.id, "job_name": job.name, "running_s": round(seconds, 1)}


class HandlerThreads:
    """The handler threads of one pool, seen from both sides: the attempts that await a
    thread (the event loop's view, which the drain reads), and the threads that still
    run (their own view, which the daemon reads before it exits: a thread abandoned by
    its attempt's timeout or by a second signal outlives the attempt)."""

    def __init__(self) -> None:
        #: The job ids of the attempts that await their handler's thread.
        self.awaited: set[str] = set()
        #: The threads that run a handler, by their job's token: the job, and when the
        #: thread took it (monotonic). Each thread writes and removes its own entry.
        self.alive: dict[str, tuple[Fetched, float]] = {}

    async def run(self, job: Fetched, func: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
        """``func()`` in a worker thread. A cancellation ends the wait at once (the
        thread runs on): the attempt's deadline and an abort do not wait for it."""
        self.awaited.add(job.id)
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(self._in_thread, job, func),
                abandon_on_cancel=True,
                limiter=limiter,
            )
        finally:
            self.awaited.discard(job.id)

    def _in_thread(self, job: Fetched, func: Callable[[], T]) -> T:
        self.alive[job.token] = (job, time.monotonic())
        try:
            return func()
        finally:
            self.alive.pop(job.token, None)

    def still_running(self) -> list[dict[str, Any]]:
        """The jobs whose handler thread still runs, as log lines list them."""
        now = time.monotonic()
        return [job_fields(job, now - since) for job, since in list(self.alive.values())]

    def holding(self, in_flight: Mapping[str, Attempt], held: set[str]) -> list[dict[str, Any]]:
        """The jobs of ``held`` still running, as log lines list them."""
        now = now_ms()
        entries = [e for e in in_flight.values() if e.job.id in held]
        return [job_fields(e.job, (now - e.since) / 1000) for e in entries]

    def leave(self, in_flight: Mapping[str, Attempt]) -> list[dict[str, Any]]:
        """Stop waiting for anything (a second signal): the attempts awaiting a thread end
        with nothing recorded (reason ``left``), the others are put back; the jobs left."""
        now, left = now_ms(), []
        for entry in list(in_flight.values()):
            if entry.job.id in self.awaited:
                left.append(job_fields(entry.job, (now - entry.since) / 1000))
                entry.cancel("left")
            else:
                entry.cancel("shutdown")
        return left
