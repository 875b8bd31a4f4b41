"""Commands that act on one queue or one job: ``queue pause|resume|clear|limit`` and
``job show|abort``.

A job name is checked before Redis is reached, so a typo is one line and exit code 2.
A name that no pool registered and no job ever carried is most likely a typo too: the
command says so on stderr, and still does what it was asked, because pausing or capping
a queue before its first pool starts is a real need (a deploy that must not run jobs
at once).
"""

from __future__ import annotations

from typing import Literal

import click
import msgspec

from rota.cli.common import (
    ExitError,
    connection_options,
    json_option,
    parse_duration,
    with_client,
    yes_option,
)
from rota.cli.output import echo_json, relative, when
from rota.cli.workflows import print_relations, relations
from rota.client import Client, validate_name
from rota.config import Settings
from rota.inspect import job_view
from rota.protocol.bounds import HANDLER

__all__ = ["job", "queue"]


def _name(ctx: click.Context, param: click.Parameter, name: str) -> str:
    try:
        return validate_name(name)
    except ValueError as exc:
        raise ExitError(str(exc)) from None


#: NAME, a job name checked before Redis is reached.
name_argument = click.argument("name", callback=_name)


async def _warn_if_unknown(client: Client, name: str, doing: str) -> None:
    if name not in await client.admin.names():
        click.echo(
            f"rota: warning: no pool or job has used the name {name!r} yet (a typo?); "
            f"{doing} anyway",
            err=True,
        )


def _cap(ctx: click.Context, param: click.Parameter, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        cap = int(text)
    except ValueError:
        raise ExitError(f"N: expected an integer, got {text!r}") from None
    if cap < 1:
        raise ExitError(f"N: must be at least 1, got {cap} (pause stops a queue)")
    if cap > HANDLER["max_concurrency"].hi:
        raise ExitError(f"N: must be at most {HANDLER['max_concurrency'].hi:.0f}, got {cap}")
    return cap


@click.group()
def queue() -> None:
    """Pause, resume, clear, cap or rate-limit the queue of a job name."""


def _switch(verb: Literal["pause", "resume"], help: str) -> click.Command:
    @click.command(verb, help=help)
    @name_argument
    @connection_options
    @with_client
    async def switch(client: Client, settings: Settings, name: str) -> None:
        await _warn_if_unknown(client, name, f"{verb}d")
        await (client.admin.pause if verb == "pause" else client.admin.resume)(name)
        click.echo(f"{verb}d {name}")

    return switch


queue.add_command(
    _switch(
        "pause",
        "Stop workers from taking jobs of NAME (running ones finish). A name no pool or"
        " job has used yet is paused too, with a warning.",
    )
)
queue.add_command(_switch("resume", "Let workers take jobs of NAME again."))


@queue.command()
@name_argument
@yes_option
@connection_options
@with_client
async def clear(client: Client, settings: Settings, name: str, yes: bool) -> None:
    """Delete every queued job of NAME."""
    (info,) = await client.admin.queues([name])
    if not yes:
        click.confirm(f"delete the {info.size} queued jobs of {name}?", abort=True)
    click.echo(f"deleted {await client.admin.clear_queue(name)} jobs")


@queue.command()
@name_argument
@click.argument("count", metavar="[N]", required=False, callback=_cap)
@click.option("--clear", "clear_", is_flag=True, help="Remove the cap.")
@connection_options
@with_client
async def limit(
    client: Client, settings: Settings, name: str, count: int | None, clear_: bool
) -> None:
    """Run at most N jobs of NAME at once across all pools, or with --clear, as many as
    the pools' concurrency allows. A name no pool or job has used yet is capped too,
    with a warning."""
    if (count is None) == (not clear_):
        raise click.UsageError("give N or --clear")
    await _warn_if_unknown(client, name, "capped" if count else "cleared")
    await client.admin.set_limit(name, count)
    click.echo(f"{name}: at most {count} at once" if count else f"{name}: no limit")


@click.group()
def job() -> None:
    """Inspect or abort one job."""


@job.command("show")
@click.argument("job_id")
@json_option
@connection_options
@with_client
async def job_show(client: Client, settings: Settings, job_id: str, as_json: bool) -> None:
    """Everything stored about job JOB_ID, the lines its handler kept with ctx.job_log, and
    the jobs it waits for and that wait for it, with their states."""
    view = await job_view(client, job_id, children=None)
    if view is None:
        raise ExitError(f"no job {job_id}", code=1)
    record, rel, logs = view.record, relations(view), view.logs
    if as_json:
        echo_json({**msgspec.structs.asdict(record), **rel, "logs": logs})
        return
    for key, value in msgspec.structs.asdict(record).items():
        if value is None or key in ("after", "group", "waits_group"):
            continue
        if key == "pending" and record.state != "waiting":
            continue
        if key == "malformed":
            if not value:
                continue
            value = " ".join(value)
        if key.endswith("_at"):
            ago = relative(value)
            value = f"{when(value)} ({ago})" if ago else when(value)
        click.echo(f"{key:>12}  {value}")
    print_relations(record, rel)
    for n, line in enumerate(logs):
        click.echo(f"{'log' if n == 0 else '':>12}  {line}")


@job.command("abort")
@click.argument("job_id")
@click.option(
    "--keep",
    default="1h",
    show_default=True,
    help="How long the aborted record stays readable: 30s, 5m, 2h, 1d.",
)
@connection_options
@with_client
async def job_abort(client: Client, settings: Settings, job_id: str, keep: str) -> None:
    """Abort job JOB_ID: a queued, scheduled, retrying or waiting job is removed now, a
    running one is cancelled by its pool. Exit code 1 when there is no such job or it
    had already finished (complete, dead or aborted): nothing was done."""
    seconds = parse_duration(keep)
    state = await client.abort(job_id, keep=seconds)
    if state == "missing":
        raise ExitError(f"no job {job_id}", code=1)
    if state in ("complete", "dead", "aborted"):
        raise ExitError(f"job {job_id} is already {state}: nothing to abort", code=1)
    if state == "running":
        click.echo(f"abort requested: {job_id} was running, its pool cancels it")
    else:
        click.echo(f"aborted {job_id} (was {state})")
