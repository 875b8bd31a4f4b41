"""The daemon: load the user's pool, run it on the best event loop, or supervise several.

``rota worker app.jobs:pool`` runs one pool process. With ``--processes N`` this process
becomes a supervisor: it starts N pool processes (each in its own session, so a Ctrl-C
in the terminal reaches only the supervisor), restarts one that dies after a short,
growing delay, forwards SIGTERM/SIGINT, and exits 0 once every child has drained. A
child that exits 2 refused its settings (every child would): the supervisor stops the
others and exits 2 instead of restarting it forever.
"""

from __future__ import annotations

import importlib
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

__all__ = ["backend_options", "load_pool", "run_pool", "supervise"]

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


def run_pool(pool: WorkerPool, settings: Settings) -> None:
    """Run ``pool`` until SIGTERM/SIGINT, on uvloop where it is installed."""
    pool.configure(settings)
    anyio.run(pool.run, backend="asyncio", backend_options=backend_options())


def supervise(
    command: Sequence[str],
    processes: int,
    *,
    env: dict[str, str] | None = None,
    max_delay: float = 10.0,
) -> int:
    """Run ``command`` ``processes`` times over, restarting children that die."""
    return anyio.run(_supervise, list(command), processes, env, max_delay)


async def _supervise(
    command: list[str], processes: int, env: dict[str, str] | None, max_delay: float
) -> int:
    stopping = anyio.Event()
    children: dict[int, Process] = {}
    refused: list[int] = []

    async def child(slot: int) -> None:
        failures = 0
        while not stopping.is_set():
            started = time.monotonic()
            proc = await anyio.open_process(
                command, stdin=subprocess.DEVNULL, stdout=None, stderr=None,
                start_new_session=True, env=env,
            )  # fmt: skip
            children[slot] = proc
            log.info("worker process started", slot=slot, pid=proc.pid)
            code = await proc.wait()
            del children[slot]
            if stopping.is_set():
                log.info("worker process stopped", slot=slot, pid=proc.pid, code=code)
                return
            if code == 2:  # bad settings (a wrong password, say): restarting cannot mend it
                log.error("worker process refused its settings: stopping", slot=slot,
                          pid=proc.pid)  # fmt: skip
                refused.append(slot)
                stopping.set()
                for other in list(children.values()):
                    other.send_signal(signal.SIGTERM)
                return
            failures = 1 if time.monotonic() - started > 30 else failures + 1
            delay = min(max_delay, 0.1 * 2 ** (failures - 1))
            log.warning("worker process died: restarting", slot=slot, pid=proc.pid,
                        code=code, delay=delay)  # fmt: skip
            with anyio.move_on_after(delay):
                await stopping.wait()

    async def forward_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                first = not stopping.is_set()
                stopping.set()
                log.info("forwarding signal", signal=signum.name, first=first,
                         children=len(children))  # fmt: skip
                for proc in list(children.values()):
                    proc.send_signal(signal.SIGTERM)

    async with anyio.create_task_group() as tg:
        tg.start_soon(forward_signals)
        async with anyio.create_task_group() as kids:
            for slot in range(processes):
                kids.start_soon(child, slot)
        tg.cancel_scope.cancel()
    log.info("all worker processes stopped")
    return 2 if refused else 0
