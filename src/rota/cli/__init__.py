"""The ``rota`` command: run workers and operate queues from a terminal.

Operator commands talk to Redis through :class:`rota.Client` only; ``worker`` and
``demo`` load the daemon (and with it the worker package) when they run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from rota.cli.acl import acl
from rota.cli.admin import enqueue, status
from rota.cli.common import ExitError
from rota.cli.complete import complete
from rota.cli.cron import cron
from rota.cli.job_actions import clean_command as _clean  # noqa: F401 - registers the commands
from rota.cli.keys import keys
from rota.cli.operate import job, queue
from rota.cli.pools import pools
from rota.cli.rates import rate as _rate  # noqa: F401 - registers `rota queue rate`
from rota.cli.run import demo, worker
from rota.cli.run_times import run_times as _run_times  # noqa: F401 - `rota queue run-times`
from rota.cli.sets import SET_GROUPS
from rota.cli.shards import shards
from rota.cli.web import web
from rota.cli.workflows import group
from rota.version import __version__

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rota")
@click.option(
    "--local-time",
    is_flag=True,
    envvar="ROTA_LOCAL_TIME",
    help="Show times in this machine's zone (with its offset and name) instead of UTC.",
)
def rota(local_time: bool) -> None:
    """rota: a job-queue daemon on Redis. Times are shown in UTC, with their offset."""


for command in (
    worker,
    demo,
    web,
    enqueue,
    status,
    queue,
    keys,
    *SET_GROUPS,
    complete,
    cron,
    job,
    group,
    acl,
    shards,
):
    rota.add_command(command)
rota.add_command(pools)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        rota.main(
            args=list(argv) if argv is not None else None, prog_name="rota", standalone_mode=False
        )
    except ExitError as exc:
        click.echo(f"rota: {exc}", err=True)
        return exc.code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.exceptions.NoArgsIsHelpError as exc:  # `rota` alone: the help, not an error
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(_one_line(exc), err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        # click's answer to a reader that left (EPIPE): stdout wrapped, exit 1. For
        # `rota job show ID | head -2` the reader has what it wanted: exit 0 quietly.
        if type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
            return 0
        raise exc
    return 0


def _one_line(exc: click.ClickException) -> str:
    """A usage error as one line, as every other error of rota is, with the command's
    help to read (click's own form is three: usage, a hint, then the error)."""
    message = " ".join(exc.format_message().split()).removesuffix(".")
    ctx = getattr(exc, "ctx", None)
    where = f" ({ctx.command_path} --help)" if ctx is not None else ""
    return f"rota: error: {message}{where}"


if __name__ == "__main__":
    sys.exit(main())
