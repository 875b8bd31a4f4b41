"""Logging with structlog: JSON lines when stdout is not a terminal, colours when it is.

Every job attempt logs one summary line (``rota.job``: name, id, attempt, outcome,
duration); what a handler logs while it runs carries the job's id and name, bound
through contextvars. Library code only logs; this module decides where lines go, and
only the daemon and the CLI call it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import msgspec
import structlog

__all__ = ["configure_logging"]

LogFormat = Literal["auto", "json", "console"]
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _dumps(obj: Any, **_: Any) -> str:
    return msgspec.json.encode(obj, enc_hook=repr).decode()


def configure_logging(
    log_format: LogFormat = "auto", level: str = "info", stream: TextIO | None = None
) -> None:
    """Send structlog's events to ``stream`` (stdout) as JSON lines or for a terminal."""
    out = stream or sys.stdout
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
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if log_format == "json":
        processors.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
