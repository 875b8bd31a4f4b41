"""The record of a namespace's shard count, and of a change of it (``rota shards resize``).

The record is the string ``{ns}:shards`` in shard 0, and a copy under the same name in
every other shard. It reads one of:

``K``               the namespace spans K shards, never changed online (generation 0);
                    absent is ``1``, so a namespace of one shard writes nothing;
``OLD>NEW@G``       a change from OLD to NEW shards is under way, generation G;
``K@G``             the namespace spans K shards, after its change of generation G.

Each change adds 1 to the generation twice: once when it starts (``OLD>NEW@G``), once
when it ends (``NEW@G+1``). A producer passes the generation it routes by to the enqueue
scripts, which refuse the call (an error reply starting with :data:`RESHARDED`) when
their shard's copy holds another: the producer reads the record again and sends anew.

The tags of the shards of a count depend on the count (see
:func:`rota.protocol.shards.shard_tags`): during a change the namespace is served over
the union of the old and the new tags, ``{ns}`` (shard 0 of every count) once.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from rota.protocol.shards import MAX_SHARDS, shard_tags

__all__ = [
    "MAX_GENERATION",
    "RESHARDED",
    "RESHARD_MESSAGE",
    "BadRecord",
    "ShardRecord",
    "parse_record",
]

#: What ``rota shards resize`` publishes on the pool-commands channel after it wrote a
#: record: every pool reads the record at once, not at its next heartbeat.
RESHARD_MESSAGE: Final = "reshard"


#: How an enqueue script's refusal for a stale generation starts.
RESHARDED: Final = "RESHARDED"

#: The highest generation a record may hold: far beyond any number of changes, and an
#: integer Lua compares exactly.
MAX_GENERATION: Final = 10**9

_RECORD: Final = re.compile(r"^([1-9][0-9]{0,2})(?:>([1-9][0-9]{0,2}))?(?:@([0-9]{1,10}))?$")


class BadRecord(ValueError):
    """A record that names no count (written by hand or by another program)."""


class ShardRecord(NamedTuple):
    """What a record says: the count served before (``old``) and after (``new``) a
    change, equal when none is under way, and the generation."""

    old: int
    new: int
    generation: int = 0

    @property
    def changing(self) -> bool:
        return self.old != self.new

    def text(self) -> str:
        """The record as stored (``"1"`` for one shard of generation 0, never written)."""
        if self.changing:
            return f"{self.old}>{self.new}@{self.generation}"
        return f"{self.new}@{self.generation}" if self.generation else str(self.new)

    def tags(self, namespace: str) -> tuple[str, ...]:
        """The tags served: the new set's in order, then the old set's not in it."""
        new = shard_tags(namespace, self.new)
        return new + tuple(t for t in shard_tags(namespace, self.old) if t not in new)

    def started(self, to: int) -> ShardRecord:
        """The record of a change from this count to ``to``."""
        return ShardRecord(self.new, to, self.generation + 1)

    def ended(self) -> ShardRecord:
        return ShardRecord(self.new, self.new, self.generation + 1)


def parse_record(raw: bytes | str | None, key: str) -> ShardRecord:
    """The record ``raw`` of ``key`` (None: absent, one shard); a :class:`BadRecord`
    naming the key for text that is no record (a count from 1 to MAX_SHARDS, a
    generation from 0 to MAX_GENERATION)."""
    if raw is None or raw in (b"", ""):
        return ShardRecord(1, 1)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    match = _RECORD.match(text)
    if match is not None:
        old = int(match[1])
        new = int(match[2] or old)
        generation = int(match[3] or 0)
        ok = max(old, new) <= MAX_SHARDS and generation <= MAX_GENERATION
        if ok and (match[2] is None or match[3] is not None):  # a change has a generation
            return ShardRecord(old, new, generation)
    raise BadRecord(
        f"{key}: {text[:64]!r} is no shard count record (K, OLD>NEW@G or K@G; counts"
        f" 1..{MAX_SHARDS}, generation 0..{MAX_GENERATION}): fix or delete it"
    )
