"""What the parts of a :class:`rota.Client` that call rota's scripts share: the
connection, the namespace's keys, and how this server takes scripts
(:class:`rota.protocol.scripts.ScriptMode`, one per client), so that a call names only
its script and its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from rota.protocol.keys import Keys
from rota.protocol.scripts import Arg, Connection, ScriptMode, script

__all__ = ["Scripted"]


class Scripted:
    """A base of :class:`rota.Client`'s parts (:class:`rota.reads.Reads`,
    :class:`rota.operations.Operations`); the client provides the attributes."""

    redis: Redis
    keys: Keys
    script_mode: ScriptMode

    async def run_script(
        self, name: str, args: Sequence[Arg], conn: Connection | None = None
    ) -> Any:
        """Call the script ``name`` in this namespace with ``args``, on ``conn`` (the
        redis-py client by default); a missing library or script is loaded on the way."""
        return await script(name)(conn or self.redis, self.keys.prefix, args, self.script_mode)
