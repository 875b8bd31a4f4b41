"""The shards of the namespace: each one's hash tag, slot, server and the jobs it holds."""

from __future__ import annotations

import msgspec
from starlette.requests import Request

from rota import inspect
from rota.inspect import ShardView
from rota.web.base import client_of
from rota.web.declare import Routes

__all__ = ["routes"]

routes = Routes()


class Shards(msgspec.Struct):
    """Each shard of the namespace (one unless the setting ``shards`` is more): its hash
    tag, slot and server, and the jobs it holds; the other pages show their sum."""

    namespace: str
    shards: list[ShardView]


@routes.page("/shards", "shards.html")
@routes.api("/api/shards", "shards", Shards)
async def shards(request: Request) -> Shards:
    """Each shard of the namespace: its tag, slot, server and the jobs it holds."""
    client = client_of(request)
    return Shards(client.namespace, await inspect.shard_views(client))
