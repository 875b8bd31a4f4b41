"""``rota dead|retry|scheduled|waiting``: list, retry now or delete the jobs of the four
sets that hold jobs outside a queue.

One factory builds the four groups, so that they take the same options, confirm the
same way and report ids the set does not hold the same way; only the columns of the
listing and the words of the help differ. Waiting jobs have no ``retry``: they run when
the jobs they wait for complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import click
import msgspec

from rota.cli.common import (
    ExitError,
    connection_options,
    json_option,
    page_options,
    with_client,
    yes_option,
)
from rota.cli.complete import search_options
from rota.cli.output import echo_json, print_table, when
from rota.client import Client, JobSet
from rota.config import Settings
from rota.protocol.job import JobRecord

__all__ = ["SET_GROUPS"]


class _View(msgspec.Struct, frozen=True):
    """What differs between the sets: the words and the columns."""

    which: JobSet
    what: str  # the group's help
    order: str  # how ``list`` sorts
    retry_help: str | None  # None: no ``retry`` command
    delete_help: str
    headers: tuple[str, ...]
    row: Callable[[JobRecord], list[Any]]


def _error(j: JobRecord) -> str:
    return (j.error or "")[:80]


_VIEWS = (
    _View(
        "dead",
        "List, retry or delete dead jobs.",
        "Dead jobs, newest first.",
        "Queue dead jobs again, with their failures reset.",
        "Delete dead jobs for good.",
        ("id", "name", "state", "attempts", "reason", "died", "error"),
        lambda j: [
            j.id,
            j.name,
            j.state,
            j.attempts,
            j.reason or "",
            when(j.finished_at),
            _error(j),
        ],
    ),
    _View(
        "retry",
        "List, retry now or delete jobs waiting for their next attempt after a failure.",
        "Jobs to be retried, the next one first.",
        "Queue jobs waiting for their next attempt now, without the rest of the backoff.",
        "Delete jobs waiting for their next attempt, for good.",
        ("id", "name", "attempts", "failures", "next attempt", "error"),
        lambda j: [j.id, j.name, j.attempts, j.failures, when(j.run_at), _error(j)],
    ),
    _View(
        "scheduled",
        "List, run now or delete jobs enqueued for later (--in, --at, enqueue_at).",
        "Scheduled jobs, the soonest first.",
        "Queue scheduled jobs now instead of at their time.",
        "Delete scheduled jobs for good.",
        ("id", "name", "run at", "enqueued"),
        lambda j: [j.id, j.name, when(j.run_at), when(j.enqueued_at)],
    ),
    _View(
        "waiting",
        "List or delete jobs waiting for other jobs to complete.",
        "Waiting jobs, the longest waiting first.",
        None,
        "Delete waiting jobs for good (the jobs waiting for them end dead).",
        ("id", "name", "pending", "waits for", "enqueued"),
        lambda j: [
            j.id,
            j.name,
            j.pending,
            " ".join([*j.after, *([f"group:{j.waits_group}"] if j.waits_group else [])]),
            when(j.enqueued_at),
        ],
    ),
)


def _chosen(ids: tuple[str, ...], all_: bool) -> list[str] | None:
    if bool(ids) == all_:
        raise click.UsageError("give job ids or --all")
    return None if all_ else list(dict.fromkeys(ids))


async def _present(client: Client, which: JobSet, ids: list[str] | None) -> list[str] | None:
    """The ids the set holds (None: all); those it does not hold are reported once the
    others are done (:func:`_report_missing`)."""
    return None if ids is None else await client.admin.in_set(which, ids)


def _report_missing(which: JobSet, ids: list[str] | None, present: list[str] | None) -> None:
    if ids is None or present is None or len(present) == len(ids):
        return
    held = set(present)
    missing = [i for i in ids if i not in held]
    raise ExitError(f"not in the {which} set: {' '.join(missing)}", code=1)


def _action(which: JobSet, verb: Literal["retry", "delete"], help: str) -> click.Command:
    """``retry`` or ``delete`` of the given ids or --all. --all asks first, and so does
    ``delete`` of ids, unless -y; off a terminal the question reads stdin, so a script
    gives -y."""

    @click.command(verb, help=help)
    @click.argument("ids", nargs=-1)
    @click.option("--all", "all_", is_flag=True, help=f"Every {which} job.")
    @yes_option
    @connection_options
    @with_client
    async def act(
        client: Client, settings: Settings, ids: tuple[str, ...], all_: bool, yes: bool
    ) -> None:
        chosen = _chosen(ids, all_)
        present = await _present(client, which, chosen)
        if present != [] and not yes and (present is None or verb == "delete"):
            if present is None:
                what = f"all {(await client.admin.job_set_sizes())[which]}"
            else:
                what = str(len(present))
            click.confirm(f"{verb} {what} {which} jobs?", abort=True)
        if present != []:
            if verb == "retry":
                click.echo(f"retried {await client.admin.retry(which, present)} jobs")
            else:
                click.echo(f"deleted {await client.admin.delete(which, present)} jobs")
        _report_missing(which, chosen, present)

    return act


async def _list_found(
    client: Client, view: _View, text: str, page: tuple[int, int], content: bool, as_json: bool
) -> None:
    offset, limit = page
    found = await client.admin.search(
        view.which, text, offset, limit, fields="content" if content else "id"
    )
    if as_json:
        jobs = [msgspec.structs.asdict(j) for j in found.jobs]
        echo_json(
            {
                "total": found.total,
                "offset": offset,
                "searched": found.searched,
                "size": found.size,
                "start": found.start,
                "jobs": jobs,
            }
        )
        return
    among = (
        f"all {found.size}"
        if found.complete
        else f"the first {found.searched} of {found.size} (the search stopped there)"
    )
    title = f"{found.total} {view.which} jobs matching {text!r} among {among}"
    if found.jobs:
        title += f": {offset + 1}-{offset + len(found.jobs)}"
    print_table(title, list(view.headers), [view.row(j) for j in found.jobs])


def _make_group(view: _View) -> click.Group:
    which = view.which

    @click.group(which, help=view.what)
    def group() -> None:
        pass

    @group.command("list", help=view.order)
    @page_options()
    @search_options
    @json_option
    @connection_options
    @with_client
    async def list_(
        client: Client,
        settings: Settings,
        limit: int,
        offset: int,
        search: str | None,
        content: bool,
        as_json: bool,
    ) -> None:
        if search:
            await _list_found(client, view, search, (offset, limit), content, as_json)
            return
        page = await client.admin.page(which, offset=offset, count=limit)
        if as_json:
            jobs = [msgspec.structs.asdict(j) for j in page.jobs]
            echo_json({"total": page.total, "offset": page.offset, "jobs": jobs})
            return
        if page.jobs:
            title = f"{which} jobs {offset + 1}-{offset + len(page.jobs)} of {page.total}"
        elif not page.total:
            title = f"no {which} jobs"
        else:
            title = f"{which} jobs: none from {offset + 1} (of {page.total})"
        print_table(title, list(view.headers), [view.row(j) for j in page.jobs])

    if view.retry_help is not None:
        group.add_command(_action(which, "retry", view.retry_help))
    group.add_command(_action(which, "delete", view.delete_help))
    return group


#: ``dead``, ``retry``, ``scheduled`` and ``waiting``, in the order ``--help`` lists them.
SET_GROUPS = tuple(_make_group(view) for view in _VIEWS)
