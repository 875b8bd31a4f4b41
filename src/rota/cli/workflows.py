"""Workflow commands: ``group show``, and what ``job show`` prints about a job's
parents, children and group (``waiting`` is one of the job sets: see sets.py)."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from rota.cli.common import ExitError, connection_options, json_option, page_options, with_client
from rota.cli.output import echo_json, print_table, when
from rota.client import Client
from rota.client.workflow import Related
from rota.config import Settings
from rota.inspect import JobView, group_view
from rota.protocol.job import JobRecord

__all__ = ["group", "relations"]


def relations(view: JobView) -> dict[str, Any]:
    """The jobs a job is tied to, as ``job show --json`` prints them: ``parents`` and
    ``children`` as ``{id, name, state}``, the ``callback`` of the group it is a member
    of, and the ``group_progress`` of the group it is a member or the callback of."""
    progress = view.group_progress
    return {
        "parents": _plain(view.parents),
        "children": _plain(view.children),
        "callback": msgspec.to_builtins(view.callback),
        "group_progress": progress.as_dict() if progress is not None else None,
    }


def _plain(jobs: list[Related]) -> list[dict[str, Any]]:
    return [msgspec.structs.asdict(r) for r in jobs]


def _line(r: dict[str, Any]) -> str:
    return f"{r['id']}  {r['name'] or '-'}  {r['state']}"


def _counts(p: dict[str, Any]) -> str:
    left = p["total"] - p["done"] - p["failed"]
    text = f"{p['done']} of {p['total']} done, {p['failed']} failed, {left} to go"
    if p.get("sent", p["total"]) < p["total"]:
        text += f" (only {p['sent']} written: send the same group again to complete it)"
    return text + (" (finished)" if p["finished"] else "")


def print_relations(record: JobRecord, rel: dict[str, Any]) -> None:
    """The lines ``job show`` adds for a job in a workflow."""
    for key, items in (("parents", rel["parents"]), ("children", rel["children"])):
        for n, r in enumerate(items):
            click.echo(f"{key if n == 0 else '':>12}  {_line(r)}")
    progress = rel["group_progress"]
    if record.group:
        counts = f" ({_counts(progress)})" if progress else ""
        click.echo(f"{'group':>12}  {record.group}{counts}")
    if rel["callback"]:
        click.echo(f"{'callback':>12}  {_line(rel['callback'])}")
    if record.waits_group:
        counts = f" ({_counts(progress)})" if progress else ""
        click.echo(f"{'callback of':>12}  group {record.waits_group}{counts}")


@click.group()
def group() -> None:
    """Show the progress of a group of jobs."""


@group.command("show")
@click.argument("group_id")
@page_options()
@json_option
@connection_options
@with_client
async def group_show(
    client: Client, settings: Settings, group_id: str, limit: int, offset: int, as_json: bool
) -> None:
    """Progress (done / failed / total), callback and members of group GROUP_ID."""
    view = await group_view(client, group_id, offset, limit)
    if view is None:
        raise ExitError(f"no group {group_id!r} (never enqueued, or expired)", code=1)
    progress, then, members = view.progress, msgspec.to_builtins(view.then), _plain(view.members)
    if as_json:
        echo_json({**progress.as_dict(), "then": then, "offset": offset, "members": members})
        return
    click.echo(f"group {group_id}: {_counts(progress.as_dict())}")
    if progress.created_at:
        click.echo(f"created {when(progress.created_at)}")
    click.echo(f"then {_line(then)}" if then else "then (no callback)")
    print_table(
        f"members {offset + 1}-{offset + len(members)} of {progress.total}",
        ["id", "name", "state"],
        [[m["id"], m["name"] or "", m["state"]] for m in members],
    )
