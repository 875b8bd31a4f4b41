"""Moving away the keys of a namespace that hold another type than rota reads.

A key written by hand with another type (a string where the ready set belongs) makes
every command of a script on it answer ``WRONGTYPE``, so that script fails on every call:
one such key would stop every pool of the namespace. The ``repair`` script
(``lua/repair.lua``) renames each such key to its quarantine key
(:meth:`rota.protocol.keys.Keys.quarantine`), keeping its data for inspection. Pools
call it only after a script answered ``WRONGTYPE``, and once at their start, so that the
scripts of the hot path check no types.

A call checks the 19 fixed keys and the 3 keys of each job name (its queue, running set
and wake list) of the names given and of :data:`CHUNK` names of ``{ns}:names``; a
namespace with more names takes one more call per :data:`CHUNK` (SSCAN's cursor), each
a bounded stop of the shard: about 10 µs of Redis time per name, 1 ms per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from rota.protocol.calls import Scope
from rota.protocol.job import reply_text

__all__ = ["CHUNK", "Moved", "repair"]

#: Names of ``{ns}:names`` a call checks (SSCAN's ``COUNT``: a hint, and a set in
#: Redis's compact encoding, up to 128 members, comes whole).
CHUNK: Final = 100


class Moved(NamedTuple):
    """A key the repair moved: its name, the type it held, and where it went."""

    key: str
    type: str
    to: str


async def repair(scope: Scope, names: Sequence[str] = ()) -> list[Moved]:
    """Move every key of the namespace (scope's shard) that holds another type than rota
    reads to its quarantine key: the keys moved. ``names``: job names to check besides
    those of ``{ns}:names`` (a pool's own, which it may not have registered yet)."""
    moved: list[Moved] = []
    cursor = "0"
    while True:
        reply = await scope.call("repair", [cursor, CHUNK, *names])
        items = [reply_text(item) for item in reply]
        moved += [Moved(*items[i : i + 3]) for i in range(1, len(items) - 2, 3)]
        cursor, names = items[0], ()
        if cursor == "0":
            return moved
