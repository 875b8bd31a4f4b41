"""One job's actions where it waits, and the clean of a set by age, as commands of the
groups they belong to: ``rota job front|delete`` (a queued job run next, or deleted
from its queue), ``rota retry kill`` (to the dead set now, reason ``killed``), and
``rota dead|retry|scheduled|complete clean --older-than`` (see
:mod:`rota.client.admin_jobs`).

Kept in a module of their own, registered on their groups when the CLI is built, as
``rota queue rate`` is. A job that moved on (a pool took it, it finished) is named on
stderr with exit code 1, nothing done; a bad age is one line and exit code 2.
"""

from __future__ import annotations

import click

from rota.cli.common import ExitError, connection_options, parse_duration, with_client, yes_option
from rota.cli.complete import complete
from rota.cli.operate import job
from rota.cli.sets import SET_GROUPS
from rota.client import Client, validate_name
from rota.client.admin_jobs import CLEANED, MAX_AGE, MAX_KILL, Cleaned
from rota.config import Settings
from rota.protocol.bounds import Bound, check

__all__ = ["clean_command", "job_delete", "job_front", "retry_kill"]


@job.command("front")
@click.argument("job_id")
@connection_options
@with_client
async def job_front(client: Client, settings: Settings, job_id: str) -> None:
    """Run queued job JOB_ID next: move it to the front of its queue (its fair key's,
    and its key takes the next turn) and wake an idle pool. This is "run now" for a
    queued job: a paused name, or one at its limit, still holds it. Exit code 1 when the
    job is in no queue (a pool took it, it finished, or it is elsewhere)."""
    if not await client.admin.jobs.to_front(job_id):
        raise ExitError(f"job {job_id} is not queued: nothing done", code=1)
    click.echo(f"{job_id}: at the front of its queue")


@job.command("delete")
@click.argument("job_id")
@yes_option
@connection_options
@with_client
async def job_delete(client: Client, settings: Settings, job_id: str, yes: bool) -> None:
    """Delete queued job JOB_ID (what waits for it ends dead). Asks first unless -y.
    Exit code 1 when the job is in no queue: a pool that took it runs it. The jobs of
    a set: ``rota dead|retry|scheduled|waiting delete``."""
    if not yes:
        click.confirm(f"delete queued job {job_id}?", abort=True)
    if not await client.admin.jobs.delete_queued(job_id):
        raise ExitError(f"job {job_id} is not queued: nothing done", code=1)
    click.echo(f"deleted {job_id}")


def _retry_group() -> click.Group:
    (group,) = [g for g in SET_GROUPS if g.name == "retry"]
    return group


@_retry_group().command("kill")
@click.argument("ids", nargs=-1, required=True)
@yes_option
@connection_options
@with_client
async def retry_kill(client: Client, settings: Settings, ids: tuple[str, ...], yes: bool) -> None:
    """Move jobs waiting for their next attempt to the dead set now, with reason
    killed, without another try (at most 1000 ids). Asks first unless -y. Exit code 1
    naming the ids the retry set no longer holds."""
    chosen = list(dict.fromkeys(ids))
    if len(chosen) > MAX_KILL:
        raise ExitError(f"IDS: at most {MAX_KILL} at once, got {len(chosen)}")
    present = await client.admin.in_set("retry", chosen)
    if present and not yes:
        click.confirm(f"kill {len(present)} retry jobs?", abort=True)
    if present:
        click.echo(f"killed {await client.admin.jobs.kill(present)} jobs")
    missing = [i for i in chosen if i not in set(present)]
    if missing:
        raise ExitError(f"not in the retry set: {' '.join(missing)}", code=1)


def clean_command(which: Cleaned) -> click.Command:
    """``clean --older-than AGE [--name NAME]`` of one set."""
    by = "when they ended" if which in ("dead", "complete") else "when they were enqueued"

    @click.command(
        "clean",
        help=f"Delete the {which} jobs older than AGE ({by}), of one job name with --name."
        " AGE: 90s, 30m, 12h, 7d, 0 (every one), at most ten years. Asks first unless -y.",
    )
    @click.option("--older-than", "age", required=True, metavar="AGE", help="30m, 12h, 7d.")
    @click.option("--name", help="Only the jobs of this job name.")
    @yes_option
    @connection_options
    @with_client
    async def clean(
        client: Client, settings: Settings, age: str, name: str | None, yes: bool
    ) -> None:
        seconds = parse_duration(age, "--older-than")
        wrong = check("--older-than", seconds, Bound(0, MAX_AGE))
        if wrong is not None:
            raise ExitError(wrong)
        try:
            if name is not None:
                validate_name(name)
        except ValueError as exc:
            raise ExitError(str(exc)) from None
        if not yes:
            of = f" of {name}" if name else ""
            click.confirm(f"delete the {which} jobs{of} older than {age}?", abort=True)
        n = await client.admin.jobs.clean(which, seconds, name)
        click.echo(f"deleted {n} {which} jobs")

    return clean


for _group in (*SET_GROUPS, complete):
    if _group.name in CLEANED:
        _group.add_command(clean_command(_group.name))
