"""The child process of an isolated handler: ``python -m rota.worker.child [MEMORY_MB]``.

A handler registered with ``@pool.job(isolated=True)`` runs here, in a process of its
own, so that a CPU-bound handler holds its own interpreter's lock and not the pool's,
a timeout or an abort can stop it (the pool kills the process), and a crash (a
segfault, ``os._exit``, the OOM killer) ends one attempt instead of the pool.

Nothing is pickled. The pool writes one JSON line per job on the child's stdin (the
handler's ``module:qualname``, the job's args as they are stored, what ``ctx`` holds)
and reads JSON lines back on the child's original stdout: log records, progress,
checkins, job log lines, and the attempt's end (a result, a failure, a retry or an
abort). The child's fd 1 is pointed at its stderr at the start, so that what a handler
prints never mixes with those lines. The module is imported by the child (once per
process: children are reused), so a handler must be a module-level function.

``MEMORY_MB`` (0: none) caps the child's address space (``RLIMIT_AS``); an allocation
past it raises MemoryError, which ends the attempt as ``crashed`` and the process with
it (its heap is in no state to be trusted with the next job).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import queue
import resource
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec
import structlog

from rota.errors import Abort, InvalidArgs, Retry
from rota.protocol.codec import encode_json
from rota.worker.registry import Handler

__all__ = ["ChildContext", "main", "resolve"]

#: The most of a traceback sent back (the job's log keeps as much).
_TRACEBACK_CHARS = 4000
_decoder = msgspec.json.Decoder()


def resolve(target: str) -> Callable[..., Any]:
    """The function named ``module:qualname``, imported."""
    module_name, _, qualname = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not a function")
    return obj  # type: ignore[no-any-return]


class _Out:
    """The pipe to the pool: whole lines, one writer at a time (a handler may log from
    threads of its own)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = encode_json(message) + b"\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)


class ChildContext:
    """What ``ctx`` offers in a child: the job's identity, its parents' results, and
    sync calls that the pool carries out for it (``progress``, ``checkin``,
    ``job_log``; fire and forget: a write Redis refuses is the pool's to report).
    ``state``, ``client``, ``enqueue`` and ``cancel_reason`` live in the pool's process
    and are not offered here."""

    def __init__(self, out: _Out, stopping: threading.Event, fields: dict[str, Any]) -> None:
        self._out, self._stopping = out, stopping
        self.id: str = fields["id"]
        self.name: str = fields["name"]
        self.args: Any = fields["args"]
        self.attempt: int = fields["attempt"]
        self.token: str = fields["token"]
        self.enqueued_at: float = fields["enqueued_at"]
        self.started_at: float = fields["started_at"]
        self.parent_results: dict[str, Any] = fields["parent_results"]
        self._logger: Any = None

    @property
    def logger(self) -> Any:
        """A structlog logger; its lines reach the pool's log with the job's fields."""
        if self._logger is None:
            self._logger = structlog.get_logger("rota.job")
        return self._logger

    @property
    def shutting_down(self) -> bool:
        return self._stopping.is_set()

    def checkin(self, message: str = "") -> bool:
        """Extend the lease, restart the idle clock; True once the pool is stopping."""
        self._out.send({"t": "checkin", "message": str(message)})
        return self._stopping.is_set()

    def progress(self, percent: float, message: str = "") -> None:
        value = float(percent)
        value = value if math.isfinite(value) else 0.0  # JSON has no NaN
        self._out.send({"t": "progress", "percent": value, "message": str(message)})

    def job_log(self, message: str) -> None:
        self._out.send({"t": "joblog", "message": str(message)})


class _Forward(logging.Handler):
    """The standard ``logging`` module's records, sent to the pool's log."""

    def __init__(self, out: _Out) -> None:
        super().__init__(logging.DEBUG)
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._out.send(
                {
                    "t": "log",
                    "logger": record.name,
                    "level": record.levelname.lower(),
                    "event": record.getMessage(),
                    "fields": {},
                }
            )
        except Exception:  # a log line must never fail the job
            self.handleError(record)


def _forwarding_processor(out: _Out) -> Callable[..., Any]:
    def forward(logger: Any, method: str, event: dict[str, Any]) -> Any:
        text = str(event.pop("event", ""))
        fields = {k: _plain(v) for k, v in event.items() if k not in ("job_id", "job_name")}
        out.send(
            {"t": "log", "logger": "rota.job", "level": method, "event": text, "fields": fields}
        )
        raise structlog.DropEvent

    return forward


def _run(out: _Out, stopping: threading.Event, handlers: dict[str, Handler], msg: Any) -> None:
    """One attempt: its end is one message (or the process's exit)."""
    try:
        handler = handlers.get(msg["target"])
        if handler is None:
            handler = Handler(name=msg["name"], func=resolve(msg["target"]))
            handlers[msg["target"]] = handler
        fields = msg["ctx"]
        args, kwargs = handler.bind(fields["args"])
        if handler.wants_ctx:
            args = (ChildContext(out, stopping, fields), *args)
        result = handler.func(*args, **kwargs)
    except MemoryError:
        out.send({"t": "crash", "message": "MemoryError: the child's memory limit was reached"})
        os._exit(1)
    except Retry as exc:
        out.send({"t": "retry", "message": str(exc), "delay": exc.delay})
    except Abort as exc:
        out.send({"t": "abort", "message": str(exc)})
    except InvalidArgs as exc:
        out.send({"t": "error", "type": "InvalidArgs", "message": str(exc), "traceback": ""})
    except (Exception, SystemExit) as exc:
        text = "".join(traceback.format_exception(exc))[-_TRACEBACK_CHARS:]
        out.send({"t": "error", "type": type(exc).__name__, "message": str(exc), "traceback": text})
    else:
        out.send({"t": "done", "result": result})


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    memory_mb = int(args[0]) if args else 0
    # A process group of its own, in the pool's session: a terminal's Ctrl-C goes to the
    # pool (which drains its children), and CPU shares stay the pool's (see _spawn).
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    out = _Out(os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)  # what a handler prints goes to stderr, not into the pool's pipe
    logging.basicConfig(level=logging.DEBUG, handlers=[_Forward(out)], force=True)
    structlog.configure(
        processors=[structlog.processors.add_log_level, _forwarding_processor(out)],
        cache_logger_on_first_use=True,
    )
    runs: queue.SimpleQueue[Any] = queue.SimpleQueue()
    stopping = threading.Event()

    def read() -> None:
        for line in sys.stdin.buffer:
            msg = _decoder.decode(line)
            if msg["t"] == "stopping" or msg.get("stopping"):
                stopping.set()
            if msg["t"] == "run":
                runs.put(msg)
        # The pool closed the pipe, or died (SIGKILL): leave now, even in the middle of
        # a job, whose lease the pool no longer holds.
        os._exit(0)

    threading.Thread(target=read, name="rota-child-reader", daemon=True).start()
    if memory_mb:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    handlers: dict[str, Handler] = {}
    out.send({"t": "ready", "pid": os.getpid()})
    while True:
        _run(out, stopping, handlers, runs.get())


if __name__ == "__main__":
    main()
