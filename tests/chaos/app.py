"""The pool the chaos tests run in worker processes: ``rota worker tests.chaos.app:pool``.

Settings come from ``ROTA_*`` environment variables. Every attempt of a job appends
lines to the ledger file named by ``CHAOS_LEDGER``, which lives outside the Redis under
test, so the tests count starts and finishes exactly:

    start <job_id> <attempt> <pid> <unix time>
    done <job_id> <attempt> <pid> <unix time>

Each line is one ``os.write`` on a descriptor opened with ``O_APPEND``: lines of many
processes never interleave, and a process killed with SIGKILL leaves whole lines only.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import anyio

import rota

_PID = os.getpid()
_LEDGER = os.environ.get("CHAOS_LEDGER")
_FD = os.open(_LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if _LEDGER else -1


def note(kind: str, ctx: rota.JobContext, at: float | None = None) -> None:
    """One ledger line, at ``at`` (epoch seconds) or now."""
    if _FD >= 0:
        t = time.time() if at is None else at
        os.write(_FD, f"{kind} {ctx.id} {ctx.attempt} {_PID} {t:.6f}\n".encode())


pool = rota.WorkerPool()


@pool.job(max_fails=1)
async def work(ctx: rota.JobContext, ms: float, again_ms: float | None = None) -> list[Any]:
    """Sleep ``ms`` milliseconds (``again_ms`` from the second attempt on, when given:
    a first attempt that lasts until its process is killed); the result names the
    attempt that produced it."""
    note("start", ctx)
    await anyio.sleep((ms if again_ms is None or ctx.attempt == 1 else again_ms) / 1000)
    note("done", ctx)
    return [_PID, ctx.attempt, int(ctx.token)]


#: The concurrency limit of ``capped`` across every pool (the tests count it in the
#: ledger): at least the shard count of any test, so that each shard has a part.
CAPPED = 12


@pool.job(max_fails=1, max_concurrency=CAPPED)
async def capped(ctx: rota.JobContext, ms: float, again_ms: float | None = None) -> None:
    """``work`` under a concurrency limit."""
    note("start", ctx)
    await anyio.sleep((ms if again_ms is None or ctx.attempt == 1 else again_ms) / 1000)
    note("done", ctx)


@pool.job(max_fails=1)
async def suicide(ctx: rota.JobContext) -> None:
    """A poison pill: kills the process that runs it."""
    note("start", ctx)
    os.kill(os.getpid(), signal.SIGKILL)


@pool.job(max_fails=1)
async def blocker(ctx: rota.JobContext, seconds: float) -> list[Any]:
    """Blocks the event loop: a blocking call inside ``async def``."""
    note("start", ctx)
    time.sleep(seconds)  # noqa: ASYNC251 - the point of this handler
    note("done", ctx)
    return [_PID, ctx.attempt, int(ctx.token)]


@pool.job(max_fails=1)
def sync_blocker(ctx: rota.JobContext, seconds: float) -> list[Any]:
    """The same work as a plain function: it runs in a worker thread."""
    note("start", ctx)
    time.sleep(seconds)
    note("done", ctx)
    return [_PID, ctx.attempt, int(ctx.token)]


@pool.job(max_fails=1, keep_result=0)
async def drain(ctx: rota.JobContext, ms: float) -> None:
    """Sleep ``ms`` milliseconds and keep nothing: its finish frees Redis's memory."""
    note("start", ctx)
    await anyio.sleep(ms / 1000)
    note("done", ctx)


@pool.job(max_fails=1)
async def flow(ctx: rota.JobContext, ms: float) -> list[Any]:
    """A step of a workflow: sleeps ``ms`` milliseconds like ``work``. The result names
    the attempt (pid, attempt, token) and holds the parents' results it was handed."""
    note("start", ctx)
    await anyio.sleep(ms / 1000)
    note("done", ctx)
    return [_PID, ctx.attempt, int(ctx.token), dict(ctx.parent_results)]


#: Seconds before a retry of ``brief`` and ``lapsing``: short, so that a job with an
#: expiry can expire while it waits in the retry set, or come back in time.
BRIEF_RETRY = 1.0
#: The expiry ``lapsing`` gives its jobs that have none of their own (seconds).
LAPSE = 1.0


async def _brief(ctx: rota.JobContext, ms: float, fails: int = 0) -> None:
    """``work`` for jobs with an expiry: its start line holds the pool's start of the
    attempt (``ctx.started_at``), the moment the pool weighed the expiry, so a test
    compares the very time the pool decided on; its first ``fails`` attempts fail."""
    note("start", ctx, ctx.started_at)
    if ctx.attempt <= fails:
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")
    await anyio.sleep(ms / 1000)
    note("done", ctx)


def _retry(failures: int) -> float:
    return BRIEF_RETRY


brief = pool.job(name="brief", max_fails=3, backoff=_retry)(_brief)
#: ``brief`` whose jobs expire ``LAPSE`` s after their enqueue unless they say otherwise:
#: an expiry only the pools know (no ``{ns}:expiring`` entry), so only the fetch and
#: the pool end these jobs.
lapsing = pool.job(name="lapsing", max_fails=3, backoff=_retry, expires_in=LAPSE)(_brief)
