"""``rota cron run``: enqueue one run of a periodic job now, from a terminal.

The run is what the web's cron page and ``POST /api/cron/{name}/run`` enqueue (see
:mod:`rota.client.console`): the args the live pools give the job, under the id a fire
time of the current second would have; the schedule goes on as planned.
"""

from __future__ import annotations

import click

from rota.cli.common import ExitError, connection_options, with_client
from rota.client import Client, console
from rota.config import Settings

__all__ = ["cron"]


@click.group()
def cron() -> None:
    """Run the periodic jobs of the live pools now."""


@cron.command()
@click.argument("name")
@connection_options
@with_client
async def run(client: Client, settings: Settings, name: str) -> None:
    """Enqueue one run of the periodic job NAME now, with the args its pools give it.

    Its schedule is not touched: the next fire time runs as planned. A run now in the
    same second as a fire time is that fire time's job (one job, not two); two runs now
    in one second are one job too. A job turned off runs: the switch stops its fire
    times, not this. Exits 1 when no live pool fires NAME.
    """
    try:
        job = await console.run_periodic(client, name)
    except console.NoPeriodicJob as exc:
        raise ExitError(str(exc), 1) from None
    except ValueError as exc:  # not a job name
        raise ExitError(str(exc)) from None
    if job.created:
        click.echo(f"{job.id}: enqueued")
    else:
        click.echo(f"{job.id}: enqueued already (the fire time of this second)")
