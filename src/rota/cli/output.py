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

from rota.client.status import duration
from rota.protocol.job import malformed_time, utc_time

__all__ = ["age", "echo_json", "local_time", "print_table", "relative", "when"]


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
    if not at or utc_time(at) is None:  # no time to count from: when() says malformed
        return ""
    return duration(max(0, int(time.time() - at)))


def relative(at: float | None) -> str:
    """A time against now, for people: "3m12s ago", or "in 5m00s" for one to come."""
    if not at or utc_time(at) is None:
        return ""
    delta = at - time.time()
    if delta > 0.5:
        return f"in {duration(int(delta))}"
    return f"{age(at)} ago"


def local_time() -> bool:
    """Whether times are shown in the machine's zone (``rota --local-time``) rather than
    in UTC."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("local_time"))


def when(at: float | None) -> str:
    """A time (seconds since the epoch) for people, with its offset, so that nobody
    reads a UTC time as local or the other way round: UTC (``2026-11-25
    09:30:00+00:00``), or with ``rota --local-time`` the machine's zone
    (``2026-11-25 10:30:00+01:00 CET``)."""
    if not at:
        return ""
    moment = utc_time(at)
    if moment is None:
        return malformed_time(at * 1000)
    if local_time():
        try:
            moment = moment.astimezone()
        except (OverflowError, ValueError):  # the first or last hours datetime holds
            return malformed_time(at * 1000)
        return f"{moment.isoformat(' ', 'seconds')} {moment.tzname()}"
    return moment.isoformat(" ", "seconds")
