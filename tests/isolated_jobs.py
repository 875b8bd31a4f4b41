"""Handlers the isolation tests register with ``isolated=True``: module-level functions,
which a child process imports by ``tests.isolated_jobs:<name>``."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from rota import Retry

__all__ = [
    "add",
    "allocate",
    "boom",
    "exits",
    "garbles",
    "holds",
    "loop_forever",
    "reports",
    "retries",
    "sleeps",
    "spin",
    "until_stopping",
    "waits_for_kill",
]


def add(a: int, b: int = 2, *, scale: int = 1) -> dict[str, Any]:
    return {"sum": (a + b) * scale, "pid": os.getpid()}


def reports(ctx: Any, steps: int) -> str:
    """Uses what ``ctx`` offers in a child."""
    logging.getLogger("tests.isolated").warning("stdlib line from the child")
    ctx.logger.warning("structlog line from the child", step_count=steps)
    for step in range(steps):
        ctx.progress(100 * (step + 1) / steps, f"step {step + 1}")
        ctx.checkin(f"at {step + 1}")
    ctx.job_log(f"ran {steps} steps in {ctx.name} attempt {ctx.attempt}")
    return f"{ctx.id}:{ctx.args}"


def loop_forever() -> None:
    """Pure Python, never returns."""
    n = 0
    while True:
        n += 1


def spin(ms: float) -> int:
    """Pure-Python work for about ``ms`` milliseconds."""
    end = time.perf_counter() + ms / 1000
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def exits(code: int) -> None:
    os._exit(code)


def garbles(line: str) -> None:
    """Writes ``line`` on the pipe to the pool, as a broken child might."""
    import gc

    # The child runs as ``python -m rota.worker.child``: its class is ``__main__._Out``.
    out: Any = next(o for o in gc.get_objects() if type(o).__name__ == "_Out")
    out._stream.write(line.encode() + b"\n")
    out._stream.flush()
    loop_forever()


def _mark(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


def waits_for_kill(path: str) -> None:
    """Writes its pid to ``path``, then works until it is killed."""
    _mark(path)
    loop_forever()


def sleeps(path: str, seconds: float) -> str:
    """Writes its pid to ``path``, then sleeps ``seconds``."""
    _mark(path)
    time.sleep(seconds)
    return "slept"


def holds(path: str, release: str) -> str:
    """Writes its pid to ``path``, then waits until the file ``release`` exists."""
    _mark(path)
    while not Path(release).exists():
        time.sleep(0.01)
    return "released"


def until_stopping(ctx: Any, path: str) -> str:
    """Writes its pid to ``path``, then checks in until the pool says it stops."""
    _mark(path)
    while not ctx.checkin("working"):
        time.sleep(0.01)
    return f"stopping seen: {ctx.shutting_down}"


def boom(message: str) -> None:
    raise ValueError(message)


def retries() -> None:
    raise Retry(delay=0, message="once more")


def allocate(mb: int) -> int:
    block = bytearray(mb * 1024 * 1024)
    return len(block)


def kills_itself() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def where() -> list[int]:
    """The child's session, process group and pid."""
    return [os.getsid(0), os.getpgid(0), os.getpid()]
