"""What every system's jobs share: the same bodies and the same way to record timings.

A job body appends one line to a file of its own worker process: job name, the time it
was enqueued (passed as the job's only argument), the time it started and the time it
finished (``time.time()``, seconds). One ``os.write`` to an ``O_APPEND`` file costs a few
microseconds and touches neither Redis nor the event loop, so it costs every system the
same and leaves the Redis figures to the system alone. The runner reads these files to
see when a run is done and to compute throughput and latency.

Standard library only: imported in both virtual environments.
"""

from __future__ import annotations

import asyncio
import os
import time

__all__ = [
    "SLEEP_SECONDS",
    "concurrency",
    "noop_body",
    "record",
    "redis_url",
    "sleep_body",
]

SLEEP_SECONDS = 0.01

_fd: int | None = None


def redis_url() -> str:
    return os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6399/0")


def concurrency() -> int:
    return int(os.environ.get("BENCH_CONCURRENCY", "10"))


def record(name: str, enqueued: float, started: float, finished: float) -> None:
    """Append one timing line to this process's record file."""
    global _fd
    if _fd is None:
        folder = os.environ.get("BENCH_RECORD_DIR")
        if not folder:
            return
        path = os.path.join(folder, f"{os.getpid()}.rec")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, b"%s %.6f %.6f %.6f\n" % (name.encode(), enqueued, started, finished))


def noop_body(name: str, enqueued: float) -> None:
    now = time.time()
    record(name, enqueued, now, now)


async def sleep_body(name: str, enqueued: float) -> None:
    started = time.time()
    await asyncio.sleep(SLEEP_SECONDS)
    record(name, enqueued, started, time.time())
