"""``rota queue rate``: set or clear the rate limit of a job name at run time.

A command of the ``queue`` group, kept in its own module: the limit is read and
checked by :mod:`rota.protocol.rate`, so the CLI, the web API and ``@pool.job(rate=)``
accept the same words.
"""

from __future__ import annotations

import click

from rota.cli.common import ExitError, connection_options, with_client
from rota.cli.operate import queue
from rota.client import Client
from rota.config import Settings

__all__ = ["rate"]


@queue.command()
@click.argument("name")
@click.argument("rate", required=False)
@click.option("--clear", is_flag=True, help="Remove the rate limit.")
@connection_options
@with_client
async def rate(
    client: Client, settings: Settings, name: str, rate: str | None, clear: bool
) -> None:
    """Let at most RATE jobs of NAME start across all pools: 100/s, 30/min, 2/hour.

    Starts are spaced one interval apart (10 ms for 100/s); after a quiet spell a burst
    of up to 100 ms worth of starts (at least two) may go at once, so 50/s can start 55
    jobs in the first second, and 50 in every second after.

    With --clear, remove the limit. A pool that starts writes its own handlers' rate,
    as for concurrency limits.
    """
    if clear == (rate is not None):
        raise ExitError("give a RATE such as 100/s, or --clear, not both")
    try:
        await client.admin.set_rate(name, None if clear else rate)
    except ValueError as exc:
        raise ExitError(str(exc)) from None
    click.echo(f"{name}: no rate limit" if clear else f"{name}: at most {rate} start")
