"""``rota complete list``: the kept complete jobs, newest first, with their run times and
a preview of their results (see :meth:`rota.client.admin.Admin.finished`).

All of them in a time window is an exact page; one name (``--name``) or a search
(``--search``) reads the window newest first and stops after ``--scan`` jobs, saying
where: ``--until`` that time goes on from there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click
import msgspec

from rota.cli.common import (
    ExitError,
    connection_options,
    json_option,
    page_options,
    parse_duration,
    with_client,
)
from rota.cli.output import echo_json, print_table, when
from rota.client import Client
from rota.client.finished import MAX_COUNT, MAX_OFFSET, Finished, FinishedJob
from rota.client.scan import SEARCH_LIMIT
from rota.client.spec import moment_seconds
from rota.config import Settings

__all__ = ["complete", "moment_option", "search_options"]

P = ParamSpec("P")
T = TypeVar("T")


def moment_option(name: str, what: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """``--since``/``--until``: an ISO-8601 time (UTC without an offset), seconds since
    the epoch, or a duration ago (``90m``, ``1d``); one line naming the flag else."""

    def read(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
        if text is None:
            return None
        try:
            if text.replace(".", "", 1).isdigit() and len(text) >= 9:
                return float(text)
            if text[:1].isdigit() and text[-1:].isalpha() and "-" not in text:
                return time.time() - parse_duration(text)
            return moment_seconds(f"--{name}", text)
        except (ValueError, click.BadParameter):
            raise ExitError(
                f"--{name}: an ISO-8601 time, seconds since the epoch or a duration ago"
                f" (30m, 2d), not {text[:40]!r}"
            ) from None

    return click.option(f"--{name}", metavar="TIME", callback=read, help=what)


_search_option = click.option(
    "--search",
    metavar="TEXT",
    help="Only the jobs whose id or name contains TEXT (any case); with --content, or"
    " whose args, kwargs, error, reason or result does.",
)
_content_option = click.option(
    "--content",
    is_flag=True,
    help="Match the search in each job's args, kwargs, error, reason and result too"
    " (reads each record's fields; default: the id and name only).",
)


def search_options(command: Callable[P, T]) -> Callable[P, T]:
    """``--search`` and what it matches (``--content``): one search over the kept jobs of
    a set, told alike by ``complete list`` and the sets' ``list``."""
    return _search_option(_content_option(command))


def _row(j: FinishedJob) -> list[object]:
    run = "" if j.run_time is None else f"{j.run_time:.3f}s"
    return [j.id, j.name, when(j.finished_at), run, (j.result or "")[:60]]


@click.group("complete", help="List the kept complete jobs (keep_result).")
def complete() -> None:
    pass


@complete.command("list", help="Complete jobs, newest first, with run time and result.")
@page_options()
@click.option("--name", metavar="NAME", help="Only the jobs of this name.")
@moment_option("since", "Only those completed at this time or after.")
@moment_option("until", "Only those completed at this time or before.")
@search_options
@click.option(
    "--scan",
    default=SEARCH_LIMIT,
    type=click.IntRange(1, 10**8),
    show_default=True,
    help="With --name or --search: read at most this many jobs, then say where it stopped.",
)
@click.option("--oldest", is_flag=True, help="Oldest first.")
@json_option
@connection_options
@with_client
async def list_(
    client: Client,
    settings: Settings,
    limit: int,
    offset: int,
    name: str | None,
    since: float | None,
    until: float | None,
    search: str | None,
    content: bool,
    scan: int,
    oldest: bool,
    as_json: bool,
) -> None:
    if offset > MAX_OFFSET:
        raise ExitError(f"--offset: at most {MAX_OFFSET} for complete jobs, not {offset}")
    if limit > MAX_COUNT:
        raise ExitError(f"--limit: at most {MAX_COUNT} for complete jobs, not {limit}")
    try:
        page = await client.admin.finished(
            name=name,
            text=search or "",
            fields="content" if content else "id",
            since=since,
            until=until,
            order="oldest" if oldest else "newest",
            offset=offset,
            count=limit,
            scan=scan,
        )
    except ValueError as exc:
        raise ExitError(str(exc)) from None
    if as_json:
        echo_json({**msgspec.structs.asdict(page), "complete": page.complete})
        return
    print_table(
        _title(page, offset),
        ["id", "name", "finished", "run time", "result"],
        [_row(j) for j in page.jobs],
    )


def _title(page: Finished, offset: int) -> str:
    title = f"{page.total} complete jobs"
    if page.jobs:
        title += f": {offset + 1}-{offset + len(page.jobs)}"
    if not page.complete:
        on = page.next_until if page.next_until is not None else page.next_since
        flag = "--until" if page.next_until is not None else "--since"
        title += (
            f" among the {page.searched} of {page.size} read (it stopped there:"
            f" {flag} {on:.3f} goes on)"
        )
    return title
