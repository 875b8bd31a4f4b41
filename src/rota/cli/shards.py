"""``rota shards``: where each shard of the namespace lives and what it holds; ``rota
shards resize N``: change the count online (see :mod:`rota.client.resize`).

A namespace over K shards (the setting ``shards``; see :mod:`rota.protocol.shards`) has
K hash tags; a cluster places each tag's slot on one of its primaries. This lists every
shard's tag, slot and server with its queued, running and set sizes, so that an operator
sees whether the shards spread over the nodes and whether one holds more than its share.
"""

from __future__ import annotations

import click
import msgspec

from rota.cli.common import ExitError, connection_options, json_option, with_client
from rota.cli.output import echo_json, print_table
from rota.client import Client
from rota.client.resize import resize as resize_namespace
from rota.config import Settings
from rota.inspect import shard_views
from rota.protocol.shards import MAX_SHARDS

__all__ = ["shards"]


@click.group(invoke_without_command=True)
@json_option
@connection_options
@click.pass_context
def shards(ctx: click.Context, /, **options: object) -> None:
    """Each shard of the namespace: its hash tag, slot, server and what it holds."""
    if ctx.invoked_subcommand is None:
        _list(**options)


@with_client
async def _list(client: Client, settings: Settings, as_json: bool) -> None:
    rows = [msgspec.structs.asdict(v) for v in await shard_views(client)]
    if as_json:
        echo_json({"namespace": client.namespace, "shards": rows})
        return
    headers = list(rows[0])
    record = client.admin.follower.route.record
    change = f" (a change of the count under way: {record.text()})" if record.changing else ""
    print_table(
        f"namespace {client.namespace}: {len(rows)} shard(s){change}",
        headers,
        [[r[h] for h in headers] for r in rows],
    )


@shards.command()
@click.argument("count", type=click.IntRange(1, MAX_SHARDS))
@click.option(
    "--wait/--no-wait",
    default=True,
    help="Wait until the old shards hold no live job and finish (default), or return"
    " after starting the change (run the command again to finish it).",
)
@click.option(
    "--timeout",
    "drain_timeout",
    type=click.FloatRange(0, 86400),
    default=600.0,
    show_default=True,
    help="Seconds to wait for the old shards to drain, then again for the pools to leave"
    " them; then stop (run it again to resume).",
)
@connection_options
@with_client
async def resize(
    client: Client, settings: Settings, count: int, wait: bool, drain_timeout: float
) -> None:
    """Change the namespace's shard count to COUNT with pools and producers running;
    run it again to resume a change cut short (see docs/operations.md)."""
    try:
        done = await resize_namespace(
            client, count, wait=wait, timeout=drain_timeout, say=lambda line: click.echo(line)
        )
    except ValueError as exc:
        raise ExitError(str(exc), 1) from None
    if not done.done:
        raise ExitError(
            f"the change is under way ({done.record}): old shards still hold live jobs;"
            " run 'rota shards resize' again to finish it",
            3,
        )
    if done.lingering:  # the change is done; the pools leave the old tags by themselves
        pools = "; ".join(f"{tag} {', '.join(ids)}" for tag, ids in done.lingering.items())
        click.echo(
            f"pools still serve retired shards: {pools}: each leaves once the jobs it runs"
            " there end (see 'Changing the shard count' in docs/operations.md)"
        )
