"""``rota shards``: where each shard of the namespace lives and what it holds.

A namespace over K shards (the setting ``shards``; see :mod:`rota.protocol.shards`) has
K hash tags; a cluster places each tag's slot on one of its primaries. This lists every
shard's tag, slot and server with its queued, running and set sizes, so that an operator
sees whether the shards spread over the nodes and whether one holds more than its share.
"""

from __future__ import annotations

from typing import Any

import click
from redis.crc import key_slot

from rota.cli.common import connection_options, with_client
from rota.cli.output import echo_json, print_table
from rota.client import Client
from rota.config import Settings
from rota.redis.topology import SlotOwnerPool

__all__ = ["shards"]


def _server(client: Client) -> str:
    """The server a part talks to: the owner of its slot in a cluster (as last found)."""
    pool = client.redis.connection_pool
    if isinstance(pool, SlotOwnerPool):
        owner = pool._owner
        return "?" if owner is None else f"{owner[0]}:{owner[1]}"
    kw = pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host', '?')}:{kw.get('port', '?')}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@connection_options
@with_client
async def shards(client: Client, settings: Settings, as_json: bool) -> None:
    """Each shard of the namespace: its hash tag, slot, server and what it holds."""
    names = await client.names()
    rows: list[dict[str, Any]] = []
    for part in client.parts:
        sizes = await part.alone.job_set_sizes()
        queues = await part.alone.queues(names)
        tag = part.keys.prefix[1:-2]
        rows.append(
            {
                "shard": part.keys.shard,
                "tag": "{" + tag + "}",
                "slot": key_slot(part.keys.prefix.encode()),
                "server": _server(part),
                "queued": sum(q.size for q in queues),
                "running": sum(q.running for q in queues),
                **sizes,
            }
        )
    if as_json:
        echo_json({"namespace": client.namespace, "shards": rows})
        return
    headers = list(rows[0])
    print_table(
        f"namespace {client.namespace}: {len(rows)} shard(s)",
        headers,
        [[r[h] for h in headers] for r in rows],
    )
