"""The blocked-loop report: a pool says when its event loop stops turning, and which job
stopped it.

An ``async def`` handler that makes a blocking call (``time.sleep``, a synchronous
client, long CPU work) stops every task of its pool, the heartbeat among them, and
nothing on the loop can say so while it lasts. So a thread watches: a task of the pool
stamps the time every ``loop_block_warn / 4`` seconds (from 0.01 to 0.25 s), and the
thread, waking as often, logs one warning once the stamp is older than
``loop_block_warn``, while the loop is still blocked: the job whose worker runs on the
loop at that moment (asyncio's current task), and how long the loop has been blocked.
When the loop turns again its task logs how long the block lasted. It costs the pool one
timer per period, and no job anything.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import anyio
import structlog

from rota.protocol.job import now_ms
from rota.worker.runtime import PoolRuntime
from rota.worker.threads import job_fields

__all__ = ["BLOCKED", "LoopWatch"]

log = structlog.get_logger("rota.pool")

BLOCKED = (
    "event loop blocked: an async def handler makes a blocking call (make it a plain def"
    " handler, or run the call in a thread); no task of the pool runs meanwhile, the"
    " heartbeat neither"
)
#: The most jobs a report lists when the task on the loop is none of the workers.
_MAX_LISTED = 10


class LoopWatch:
    def __init__(self, rt: PoolRuntime) -> None:
        self.rt = rt
        self.limit = rt.settings.loop_block_warn
        self.period = min(0.25, max(0.01, self.limit / 4))
        self._lock = threading.Lock()
        self._stamp = time.monotonic()
        #: What the thread reported of the block under way, until the loop turns again.
        self._reported: dict[str, Any] | None = None

    async def run(self) -> None:
        """Stamp the time until cancelled, with the watching thread alongside (a daemon
        thread: it never holds the process, and ends within a period of this task)."""
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        self._stamp = time.monotonic()
        watcher = threading.Thread(
            target=self._watch, args=(loop, stop), name="rota loop watch", daemon=True
        )
        watcher.start()
        try:
            while True:
                await anyio.sleep(self.period)
                self._turned()
        finally:
            stop.set()

    def _blocked(self, now: float) -> float:
        """How long past its period the loop has not stamped the time."""
        return now - self._stamp - self.period

    def _turned(self) -> None:
        now = time.monotonic()
        with self._lock:
            blocked, reported = self._blocked(now), self._reported
            self._stamp, self._reported = now, None
            if reported is not None:
                log.warning("event loop turns again", blocked_s=round(blocked, 3), **reported)
            elif blocked >= self.limit:  # the thread could not run (a call held the GIL)
                log.warning(
                    "event loop was blocked",
                    pool=self.rt.pool_id,
                    blocked_s=round(blocked, 3),
                    limit=self.limit,
                )

    def _watch(self, loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        while not stop.wait(self.period):
            with self._lock:
                blocked = self._blocked(time.monotonic())
                if blocked < self.limit or self._reported is not None:
                    continue
                self._reported = self._culprit(loop)
                log.warning(
                    BLOCKED,
                    blocked_s=round(blocked, 3),
                    limit=self.limit,
                    **self._reported,
                )

    def _culprit(self, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
        """The job whose worker runs on the loop now; else what runs on the loop: the
        task's name and the jobs in flight outside threads."""
        rt = self.rt
        try:
            task = asyncio.current_task(loop)
            entries = list(rt.in_flight.values())
        except RuntimeError:  # changed as it was read: the loop turns again
            task, entries = None, []
        now = now_ms()
        fields: dict[str, Any] = {"pool": rt.pool_id}
        for entry in entries:
            if entry.task is task:
                return fields | job_fields(entry.job, (now - entry.since) / 1000)
        on_loop = [e for e in entries if e.job.id not in rt.threads.awaited]
        fields["task"] = task.get_name() if task is not None else None
        fields["jobs"] = [job_fields(e.job, (now - e.since) / 1000) for e in on_loop[:_MAX_LISTED]]
        return fields
