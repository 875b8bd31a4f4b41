"""The pool's workers, and the steps of the drain that end them.

``concurrency`` workers each take the next job the fetchers handed off
(:mod:`rota.worker.handoff`), run it in its shard's runtime and give its outcome to that
shard's acker. At the drain (:meth:`rota.worker.run.PoolRun.drain`) the jobs not
started go back to their queues, the running ones have ``grace`` to finish, and the rest
are cancelled (those in threads waited for while their leases hold).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import anyio
import structlog

from rota.protocol.job import Reason
from rota.protocol.rows import Dead, Requeue
from rota.worker.acker import Acker
from rota.worker.runner import run_job
from rota.worker.runtime import PoolRuntime, worker_task
from rota.worker.scopes import until_forced
from rota.worker.threads import HOLD_REPORT, HOLDING, LEFT

__all__ = ["cancel_the_rest", "give_back_unstarted", "run_workers", "wait_for_workers"]

log = structlog.get_logger("rota.pool")


async def run_workers(
    rt: PoolRuntime, shards: Sequence[PoolRuntime], ackers: Sequence[Acker]
) -> None:
    """Run the pool's workers until the handoff closes; ``shards`` and ``ackers`` by a
    job's shard (lists a change of the shard count grows)."""
    async with anyio.create_task_group() as workers:
        for _ in range(rt.settings.concurrency):
            workers.start_soon(_worker, rt, shards, ackers)


async def _worker(rt: PoolRuntime, shards: Sequence[PoolRuntime], ackers: Sequence[Acker]) -> None:
    handoff, children = rt.handoff, rt.children
    isolated = {name for name, h in rt.handlers.items() if h.isolated}
    worker_task.set(asyncio.current_task())  # type: ignore[arg-type]
    while (job := await handoff.take()) is not None:
        start = time.perf_counter()
        runtime, acker = shards[job.shard], ackers[job.shard]
        if runtime.stopping.is_set():
            acker.add(Requeue.of(job))
        else:
            try:
                if (outcome := await run_job(runtime, job)) is not None:
                    acker.add(outcome)
            except Exception as exc:  # a bug must not take the pool down
                log.exception("job attempt failed inside rota", job_id=job.id)
                acker.add(Dead.of(job, Reason.ERROR, f"internal error: {exc!r}"))
        if children is not None and job.name in isolated:
            children.ended()
        handoff.done(time.perf_counter() - start)


def give_back_unstarted(rt: PoolRuntime, ackers: Sequence[Acker]) -> None:
    """Jobs leased and not started go back to the front of their queues, the last
    leased first, so that the first leased is next again: their order holds."""
    for job in reversed(rt.handoff.close()):
        ackers[job.shard].add(Requeue.of(job))


async def wait_for_workers(rt: PoolRuntime, done: anyio.Event) -> None:
    """Let running jobs finish, for ``grace`` seconds or until a second signal."""
    log.info("pool draining", pool=rt.pool_id, running=len(rt.in_flight), grace=rt.settings.grace)
    await until_forced(rt.force, rt.settings.grace, done.wait)


async def cancel_the_rest(rt: PoolRuntime, done: anyio.Event) -> None:
    """Cancel the jobs still running on the event loop: they go back to their queues
    (see runner). Those whose handler runs in a thread are waited for, their leases
    kept, until they end or a second signal leaves them (see rota.worker.threads)."""
    threads = rt.threads
    held = set(threads.awaited)
    for entry in list(rt.in_flight.values()):
        if entry.job.id not in held:
            entry.cancel("shutdown")
    while held and not (done.is_set() or rt.force.is_set()):
        if holding := threads.holding(rt.in_flight, held):
            log.warning(HOLDING, pool=rt.pool_id, jobs=holding, lease=rt.settings.lease)
        await until_forced(rt.force, HOLD_REPORT, done.wait)
    if rt.force.is_set() and (left := threads.leave(rt.in_flight)):
        log.error(LEFT, pool=rt.pool_id, jobs=left, lease=rt.settings.lease)
    await done.wait()
