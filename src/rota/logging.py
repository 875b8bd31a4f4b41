"""Logging with structlog: JSON lines when stdout is not a terminal, colours when it is.

Every job attempt logs one summary line (``rota.job``: name, id, attempt, outcome,
duration); what a handler logs while it runs carries the job's id and name, bound
through contextvars. Library code only logs; this module decides where lines go, and
only the daemon and the CLI call it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, TextIO

import msgspec
import structlog

__all__ = ["JobLine", "StdlibBridge", "configure_logging"]

#: Writes a job attempt's summary line: ``(level, fields)``. :func:`configure_logging`
#: returns one for JSON output, which a pool then writes its lines with: the summary line
#: of every attempt skips structlog's generic pipeline (about 17 µs a line, as much as
#: running a no-op job) and writes the same JSON, context variables included.
JobLine = Callable[[str, dict[str, Any]], None]

LogFormat = Literal["auto", "json", "console"]
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _dumps(obj: Any, **_: Any) -> str:
    return msgspec.json.encode(obj, enc_hook=repr).decode()


#: "000" to "999": the microseconds of a timestamp are two lookups, not a format.
_DIGITS = [f"{i:03d}" for i in range(1000)]


class _Stamp:
    """ISO 8601 UTC timestamps with microseconds, as structlog's ``TimeStamper`` writes
    them, with the date and time formatted once a second instead of once a line (and
    the fraction from a table: a formatted float costs as much as the rest of a line)."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, _: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
        micros = time.time_ns() // 1000
        second = micros // 1_000_000
        fraction = micros - second * 1_000_000
        if second != self._second:
            self._second = second
            when = datetime.fromtimestamp(second, UTC)
            self._prefix = when.strftime("%Y-%m-%dT%H:%M:%S.")
        event["timestamp"] = (
            self._prefix + _DIGITS[fraction // 1000] + _DIGITS[fraction % 1000] + "Z"
        )
        return event


class LineWriter:
    """A structlog logger that writes lines in batches: in an event loop, once per turn
    of the loop (a busy pool logs a line per job, and one write and flush per line cost
    more than the job); outside one, at once. Thread-safe: sync handlers log from
    worker threads."""

    def __init__(self, file: TextIO) -> None:
        self._file = file
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._scheduled: asyncio.AbstractEventLoop | None = None
        self._thread = 0  # the thread of the loop the flush is scheduled on
        atexit.register(self.flush)

    def msg(self, message: str) -> None:
        thread = threading.get_ident()
        with self._lock:
            self._lines.append(message)
            if self._scheduled is not None and self._thread == thread:
                return  # the flush is scheduled on this thread's loop (no loop lookup:
                # on 3.11 each costs a system call)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: write now
            loop = None
        if loop is not None:
            with self._lock:
                if self._scheduled is loop:
                    return
                if self._scheduled is None:
                    loop.call_soon(self.flush)
                    self._scheduled, self._thread = loop, thread
                    return
        self.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg

    def flush(self) -> None:
        with self._lock:
            self._scheduled = None
            if not self._lines:
                return
            text = "\n".join(self._lines) + "\n"
            self._lines.clear()
            with contextlib.suppress(OSError, ValueError):  # a closed pipe or file
                self._file.write(text)
                self._file.flush()


class _Bound:
    """The values bound with ``structlog.contextvars``, read from structlog's own table
    of context variables: ``get_contextvars`` copies the whole context and tests every
    variable's name, a tenth of a no-op job's cost when done per attempt. Falls back to
    it when a structlog release keeps no such table."""

    __slots__ = ("_pairs", "_table")

    def __init__(self) -> None:
        table = getattr(structlog.contextvars, "_CONTEXT_VARS", None)
        self._table: dict[str, Any] | None = table if isinstance(table, dict) else None
        self._pairs: tuple[tuple[str, Any], ...] = ()

    def __call__(self) -> dict[str, Any]:
        table = self._table
        if table is None:
            return structlog.contextvars.get_contextvars()
        if len(table) != len(self._pairs):  # a name bound for the first time
            prefix = structlog.contextvars.STRUCTLOG_KEY_PREFIX
            self._pairs = tuple((k.removeprefix(prefix), v) for k, v in list(table.items()))
        bound = {}
        for key, var in self._pairs:
            value = var.get()
            if value is not ...:
                bound[key] = value
        return bound


def _json_job_line(writer: LineWriter, min_level: int) -> JobLine:
    stamp = _Stamp()
    encode = msgspec.json.Encoder(enc_hook=repr).encode
    bound_values = _Bound()

    def write(level: str, fields: dict[str, Any]) -> None:
        if _LEVELS[level] < min_level:
            return
        bound = bound_values()
        event = {**bound, **fields} if bound else fields
        event["event"] = "job"
        event["level"] = level
        stamp(None, "", event)
        writer.msg(encode(event).decode())

    return write


class StdlibBridge(logging.Handler):
    """Hands records of the standard ``logging`` module (handlers' own loggers, libraries)
    to structlog, so they come out as the pool's lines do: one JSON line off a terminal,
    with the job's id bound while a job runs, at the configured level."""

    _METHODS: ClassVar[dict[str, str]] = {
        "DEBUG": "debug",
        "INFO": "info",
        "WARNING": "warning",
        "ERROR": "error",
    }

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log = structlog.get_logger(record.name)
            method = self._METHODS.get(record.levelname)
            if method is None:
                method = "critical" if record.levelno >= logging.CRITICAL else "info"
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info:
                fields["exc_info"] = record.exc_info
            getattr(log, method)(record.getMessage(), **fields)
        except Exception:
            self.handleError(record)


def _bridge_stdlib(level: str) -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StdlibBridge)]:
        root.removeHandler(handler)
    root.addHandler(StdlibBridge())
    root.setLevel(_LEVELS[level])


def configure_logging(
    log_format: LogFormat = "auto", level: str = "info", stream: TextIO | None = None
) -> JobLine | None:
    """Send structlog's events, and the standard ``logging`` module's records, to
    ``stream`` (stdout) as JSON lines or for a terminal. Returns the writer of the
    per-attempt job lines for JSON output (give it to the pool: ``WorkerPool.job_line``),
    None for a terminal, whose lines go through structlog like any other."""
    out = stream or sys.stdout
    writer = LineWriter(out)
    if log_format == "auto":
        log_format = "console" if out.isatty() else "json"
    renderer: Any
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer(serializer=_dumps)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _Stamp(),
    ]
    if log_format == "json":
        processors.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=lambda *_: writer,
        cache_logger_on_first_use=True,
    )
    _bridge_stdlib(level)
    return _json_job_line(writer, _LEVELS[level]) if log_format == "json" else None
