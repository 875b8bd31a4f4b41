"""The daemon: load the user's pool, run it on the best event loop, or supervise several.

``rota worker app.jobs:pool`` runs one pool process. With ``--processes N`` this process
becomes a supervisor: it starts N pool processes (each in its own session, so a Ctrl-C
in the terminal reaches only the supervisor), restarts one that dies after a short,
growing delay, forwards SIGTERM/SIGINT, and exits 0 once every child has drained. A
child that exits 2 refused its settings (every child would): the supervisor stops the
others and exits 2 instead of restarting it forever. A second signal reaches the
children too: each stops without waiting for its running jobs.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import Process

from rota.config import Settings
from rota.worker.pool import WorkerPool

__all__ = ["STOPPED", "backend_options", "load_pool", "run_pool", "supervise"]

log = structlog.get_logger("rota.daemon")


def load_pool(target: str) -> WorkerPool:
    """Import ``module:attribute`` (the working directory is importable)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected MODULE:POOL, e.g. app.jobs:pool, got {target!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, WorkerPool):
        raise TypeError(f"{target} is a {type(obj).__name__}, not a rota.WorkerPool")
    return obj


def backend_options() -> dict[str, Any]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


#: The exit code of a ``rota worker`` process whose pool an operator stopped through
#: Redis (``rota pools stop``): its supervisor does not start it again.
STOPPED = 3


def run_pool(pool: WorkerPool, settings: Settings) -> None:
    """Run ``pool`` until SIGTERM/SIGINT, on uvloop where it is installed. Handler
    threads that still run once the pool has stopped (left by a second signal, or
    abandoned at their timeout) cannot be stopped, and the interpreter would wait for
    them: the process exits without them, with 0, once the exit handlers have run."""
    pool.configure(settings)
    anyio.run(pool.run, backend="asyncio", backend_options=backend_options())
    if left := pool.threads.still_running():
        log.warning("exiting without waiting for handler threads that still run", jobs=left)
        atexit._run_exitfuncs()  # the log's last lines among them
        os._exit(0)


def supervise(
    command: Sequence[str],
    processes: int,
    *,
    env: dict[str, str] | None = None,
    max_delay: float = 10.0,
) -> int:
    """Run ``command`` ``processes`` times over, restarting children that die."""
    return anyio.run(_Supervisor(list(command), env, max_delay).run, processes)


class _Supervisor:
    """The worker processes of one ``rota worker --processes N``, one per slot."""

    def __init__(self, command: list[str], env: dict[str, str] | None, max_delay: float) -> None:
        self.command = command
        self.env = env
        self.max_delay = max_delay
        self.stopping = anyio.Event()
        self.children: dict[int, Process] = {}
        self.refused: list[int] = []

    async def run(self, processes: int) -> int:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.forward_signals)
            async with anyio.create_task_group() as kids:
                for slot in range(processes):
                    kids.start_soon(self.child, slot)
            tg.cancel_scope.cancel()
        log.info("all worker processes stopped")
        return 2 if self.refused else 0

    async def child(self, slot: int) -> None:
        """Run the slot's process, and again each time it dies, after a growing delay."""
        failures = 0
        while not self.stopping.is_set():
            started = time.monotonic()
            proc = await anyio.open_process(
                self.command, stdin=subprocess.DEVNULL, stdout=None, stderr=None,
                start_new_session=True, env=self.env,
            )  # fmt: skip
            self.children[slot] = proc
            log.info("worker process started", slot=slot, pid=proc.pid)
            code = await proc.wait()
            del self.children[slot]
            if self.stopping.is_set():
                log.info("worker process stopped", slot=slot, pid=proc.pid, code=code)
                return
            if code == STOPPED:  # an operator stopped its pool: it stays stopped
                log.info("worker process stopped by an operator: not restarted", slot=slot,
                         pid=proc.pid)  # fmt: skip
                return
            if code == 2:  # bad settings (a wrong password, say): restarting cannot mend it
                log.error("worker process refused its settings: stopping", slot=slot,
                          pid=proc.pid)  # fmt: skip
                self.refused.append(slot)
                self.stop()
                return
            failures = 1 if time.monotonic() - started > 30 else failures + 1
            delay = min(self.max_delay, 0.1 * 2 ** (failures - 1))
            log.warning("worker process died: restarting", slot=slot, pid=proc.pid,
                        code=code, delay=delay)  # fmt: skip
            with anyio.move_on_after(delay):
                await self.stopping.wait()

    def stop(self) -> None:
        """Stop restarting, and ask every running process to drain. A child that has
        exited but whose end its slot has not handled yet (two children refusing their
        settings at once) has nothing to signal."""
        self.stopping.set()
        for proc in list(self.children.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    async def forward_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("forwarding signal", signal=signum.name,
                         first=not self.stopping.is_set(), children=len(self.children))  # fmt: skip
                self.stop()
