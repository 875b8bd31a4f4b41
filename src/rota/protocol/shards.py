"""Which shard of a namespace holds a job: the routing rule every producer follows.

A namespace may span K shards (the setting ``shards``, default 1). Shard ``i`` is a
whole copy of the one-shard layout under its own hash tag: ``{ns}`` for shard 0 (so
K = 1 is the one-shard layout, byte for byte) and ``{ns~i}`` or ``{ns~i.n}`` for the
others, chosen so that their slots spread evenly (:func:`shard_tags`). Every script
touches the keys of one tag, so each stays atomic on the node that owns the tag's slot,
and a cluster spreads the shards over its nodes.

Enqueue routes and never coordinates: a job goes to the shard of its *route*, one call
to one node. The route is, in this order:

1. its group's id, for a member or the callback of a group (a group lives in one shard);
2. its unique key (so uniqueness stays exact: the lock and the job share a shard), or
   its debounce key (the pending job and its key share a shard, for the same reason);
3. its first parent's shard, for a job that waits for others (a flow follows its root):
   the shard a parent enqueued in the same call went to (or that a chain found holds
   a parent from before), else the one its id names;
4. its fair key, for a job that carries one: a key lives in one shard, so that its
   limit, rate and turns are exact (a keyed job routed by 1-3 instead lands where those
   name, its key's turns and limit then counted in that shard for it);
5. its job name, for a job of an *ordered* name (``Client(ordered=...)``, the setting
   ``ordered``, or ``ordered=True`` on the job): every job of the name then shares one
   shard, whose queue is FIFO, so they start in enqueue order as on one server, at the
   throughput of one shard (a job of the name routed by 1-4 is outside that order);
6. its own id.

A key is routed by ``crc32(route) % K`` (CRC-32 as zlib computes it). A job id chosen
by rota for a job routed by 1-5 is drawn until its own CRC-32 names the same shard, so
that a reader that knows only the id finds the job's shard from the id; a reader looks
there first and, for an id chosen by a producer, in the other shards after.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final
from zlib import crc32

from rota.protocol.job import new_id
from rota.protocol.rows import EnqueueRow
from rota.wire.redispy import key_slot

__all__ = [
    "MAX_SHARDS",
    "SLOTS",
    "is_shard_tag",
    "new_id_in",
    "place",
    "shard_of",
    "shard_of_row",
    "shard_tag",
    "shard_tags",
]

#: The most shards a namespace may span: far beyond what a cluster of 100 primaries
#: needs, and few enough that a reader visiting every shard stays cheap.
MAX_SHARDS: Final = 256


#: Hash slots of a Redis Cluster.
SLOTS: Final = 16384


@functools.cache
def shard_tags(namespace: str, shards: int) -> tuple[str, ...]:
    """The hash tags (without braces) of the ``shards`` shards of ``namespace``, spread
    over the slot space: with the slot space cut in K equal ranges, shard 0 is
    ``namespace`` (one shard is the one-slot layout) wherever it falls, and shards 1..K-1
    take the other ranges in order, each the first of ``ns~i``, ``ns~i.1``, ``ns~i.2``...
    whose slot (CRC16, as Redis Cluster hashes a key) is in its range. A cluster whose
    primaries own equal runs of slots (what ``redis-cli --cluster create`` makes) then
    holds K / N shards on each of its N primaries when N divides K."""
    if shards <= 1:
        return (namespace,)
    width = SLOTS / shards
    home = int(key_slot(namespace.encode()) // width)
    tags = [namespace]
    for i, target in enumerate((r for r in range(shards) if r != home), start=1):
        tag, n = f"{namespace}~{i}", 0
        while int(key_slot(tag.encode()) // width) != target:
            n += 1
            tag = f"{namespace}~{i}.{n}"
        tags.append(tag)
    return tuple(tags)


def is_shard_tag(namespace: str, tag: str) -> bool:
    """Whether ``tag`` has the form :func:`shard_tags` gives a shard past the first of
    ``namespace`` (``ns~i`` or ``ns~i.n``), at some shard count."""
    rest = tag.removeprefix(namespace + "~")
    if rest == tag:
        return False
    i, dot, n = rest.partition(".")
    return i.isdigit() and 1 <= int(i) < MAX_SHARDS and (n.isdigit() if dot else True)


def shard_tag(namespace: str, shard: int, shards: int) -> str:
    """The hash tag (without braces) of shard ``shard`` of ``namespace``."""
    return shard_tags(namespace, shards)[shard]


def shard_of(route: str, shards: int) -> int:
    """The shard that ``route`` (a job id, unique or debounce key, group id) names."""
    return crc32(route.encode()) % shards if shards > 1 else 0


def shard_of_row(row: EnqueueRow, shards: int, placed: Mapping[str, int] | None = None) -> int:
    """The shard a job goes to (see the module's rule). ``placed``: the shards of the
    jobs sent before it in the same call, by id: a parent among them is where it went,
    which an id the producer chose does not name (a chain of chosen ids)."""
    if shards <= 1:
        return 0
    group = row.group or row.waits_group
    if group:
        return shard_of(group, shards)

    def shard_of_parent(parent: str) -> int:
        found = None if placed is None else placed.get(parent)
        return shard_of(parent, shards) if found is None else found

    if row.unique:
        shard = shard_of(row.unique, shards)
        if row.after and {shard_of_parent(p) for p in row.after.split()} != {shard}:
            raise ValueError(
                f"job {row.id}: its unique key and its parents name different shards of"
                " the namespace (a unique key is kept in the shard it names): give it no"
                " unique key, or no parents"
            )
        return shard
    if row.debounce_key:  # never with parents (rota.client.debounce)
        return shard_of(row.debounce_key, shards)
    if row.after:
        parents = {shard_of_parent(p) for p in row.after.split()}
        if len(parents) > 1:
            raise ValueError(
                f"job {row.id}: its parents ({row.after}) are in different shards of the"
                " namespace, and a job can wait only for jobs of its own shard: enqueue the"
                " parents of one job as a flow (each after the first, or in one chain or"
                " group), so that they share a shard"
            )
        return parents.pop()
    if row.fair:
        return shard_of(row.fair, shards)
    return shard_of(row.name if row.ordered else row.id, shards)


def new_id_in(shard: int, shards: int, job_id: str = "") -> str:
    """A new job id that names ``shard`` (``job_id`` itself if it does): K draws on
    average."""
    job_id = job_id or new_id()
    while shard_of(job_id, shards) != shard:
        job_id = new_id()
    return job_id


def place(row: EnqueueRow, shards: int) -> EnqueueRow:
    """``row`` with an id of its own shard: for a row whose id rota chose, drawn again
    until the id names the shard the row is routed to."""
    job_id = new_id_in(shard_of_row(row, shards), shards, row.id)
    return row if job_id is row.id else row._replace(id=job_id)
