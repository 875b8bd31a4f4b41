"""``rota shards``: where each shard of the namespace lives and what it holds.

A namespace over K shards (the setting ``shards``; see :mod:`rota.protocol.shards`) has
K hash tags; a cluster places each tag's slot on one of its primaries. This lists every
shard's tag, slot and server with its queued, running and set sizes, so that an operator
sees whether the shards spread over the nodes and whether one holds more than its share.
"""

from __future__ import annotations

import click
import msgspec

from rota.cli.common import connection_options, with_client
from rota.cli.output import echo_json, print_table
from rota.client import Client
from rota.config import Settings
from rota.inspect import shard_views

__all__ = ["shards"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@connection_options
@with_client
async def shards(client: Client, settings: Settings, as_json: bool) -> None:
    """Each shard of the namespace: its hash tag, slot, server and what it holds."""
    rows = [msgspec.structs.asdict(v) for v in await shard_views(client)]
    if as_json:
        echo_json({"namespace": client.namespace, "shards": rows})
        return
    headers = list(rows[0])
    print_table(
        f"namespace {client.namespace}: {len(rows)} shard(s)",
        headers,
        [[r[h] for h in headers] for r in rows],
    )
