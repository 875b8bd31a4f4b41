"""Fair keys, the reads the operator's tools need beside
:meth:`rota.client.fair.FairKeys.of`: the default concurrency limit of a name's
keys, which the web UI and ``rota keys list`` show above the keys (a key's own row says
the limit it runs under, not whether that is its own or the default).

The default is written to every shard whole (see
:meth:`~rota.client.fair.FairKeys.set_key_limit`), so the first shard's copy is read:
one command, whatever the number of keys or shards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.client.fair import setting
from rota.protocol.job import validate_name

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["default_key_limit"]


async def default_key_limit(client: Client, name: str) -> int | None:
    """The concurrency limit every key of ``name`` without its own runs under (None:
    none); a stored value out of range reads as none, as the fetch reads it."""
    validate_name(name)
    first = client.admin.shards[0]
    (raw,) = await first.piped(lambda p: [p.hget(first.keys.fair_set(name), "l*")])
    return setting(raw, "limit")
