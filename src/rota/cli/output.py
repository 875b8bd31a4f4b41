"""How the CLI prints: rich tables on a terminal, plain tab-separated text when piped,
JSON on request."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.table import Table

__all__ = ["age", "echo_json", "print_table", "when"]


def echo_json(value: Any) -> None:
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if sys.stdout.isatty():
        table = Table(title=title, title_justify="left", expand=False)
        for h in headers:
            table.add_column(h)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        Console().print(table)
        return
    click.echo(f"# {title}")
    click.echo("\t".join(headers))
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


def age(at: float | None) -> str:
    """How long ago a time (seconds since the epoch) was, for people: 4s, 3m12s, 2h05m,
    3d04h."""
    if not at:
        return ""
    return duration(max(0, int(time.time() - at)))


def duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def when(at: float | None) -> str:
    """A time (seconds since the epoch) in local time, for people."""
    if not at:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
