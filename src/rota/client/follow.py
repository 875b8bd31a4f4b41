"""How a client follows its namespace's shard record (see :mod:`rota.protocol.reshard`):
read it from shard 0, serve the shards it names (the union of the old and new ones
during a change, connections kept by tag), and send again what a shard refused because
the producer routed by another generation.

A client reads the record only when a shard refuses an enqueue (``RESHARDED``) or when
told to (:meth:`rota.Client.reread`): a producer pays no round trip per enqueue for it;
the enqueue scripts compare the generation it passes with their shard's copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio

from rota.client.routing import Shards
from rota.client.shard import Resharded, Shard
from rota.client.spec import Enqueued
from rota.errors import RedisRefused
from rota.protocol.keys import Keys, tag_of
from rota.protocol.reshard import BadRecord, ShardRecord, parse_record
from rota.protocol.rows import EnqueueRow
from rota.wire.redispy import REDIS_ERRORS, Redis, wrong_type

__all__ = ["Follower", "read_record"]

#: How many times an enqueue refused for a stale generation is sent again (the record
#: read anew each time) before the refusal is raised: a change writes its record into
#: every shard one after the other, a few milliseconds.
RESENDS = 50


async def read_record(shard0: Shard) -> ShardRecord | None:
    """The namespace's shard record as shard 0 holds it (None: none); a
    :class:`BadRecord` (one line naming the key) for one that names no count, or a key
    of another type."""
    key = shard0.keys.shards
    try:
        raw = await shard0.redis.get(key)
    except REDIS_ERRORS as exc:
        if not wrong_type(exc):
            raise
        raise BadRecord(f"{key}: holds another type than a string: fix or delete it") from None
    return None if raw is None else parse_record(raw, key)


Send = Callable[[Shard, list[EnqueueRow]], Awaitable[list[Enqueued]]]


class Follower:
    """The shards of one client by tag (kept for its whole life: a pool may still serve
    one the record no longer names), and what makes a new one's connection."""

    def __init__(self, route: Shards, connect: Callable[[str], Redis] | None) -> None:
        self.route = route
        self.connect = connect
        self.known: dict[str, Shard] = {tag_of(s.keys.prefix): s for s in route.all}
        #: The count the client was made with: what a namespace without a record spans
        #: (no pool of several shards has run yet), as before records had generations.
        self.configured = route.routing
        route.reread = self.changed

    async def reread(self) -> ShardRecord:
        """Read the record and follow it; the record (the configured count when there
        is none)."""
        record = await read_record(self.route.all[0])
        if record is None:
            record = ShardRecord(self.configured, self.configured)
        if record != self.route.record:
            self.follow(record)
        return record

    async def changed(self) -> bool:
        """Read the record and follow it: whether it changed. One that cannot be read
        (written by hand, Redis away) changes nothing here: a read by id that missed
        raises what it found, not this."""
        before = self.route.record
        try:
            await self.reread()
        except BadRecord:
            return False
        except REDIS_ERRORS:
            return False
        return self.route.record != before

    def follow(self, record: ShardRecord) -> None:
        ns = self.route.all[0].keys.namespace
        shards = [self.shard(tag, i) for i, tag in enumerate(record.tags(ns))]
        self.route.follow(shards, record)

    def shard(self, tag: str, i: int = 0) -> Shard:
        """The shard of ``tag`` (made, at place ``i``, when the client has none yet): one
        a record names, or one a change retired that the command still settles."""
        shard = self.known.get(tag)
        if shard is None:
            first = self.route.all[0]
            redis = first.redis if self.connect is None else self.connect(tag)
            keys = Keys.of_tag(first.keys.namespace, tag, i)
            shard = Shard(redis, keys, 0, owns_redis=self.connect is not None)
            self.known[tag] = shard
        return shard

    async def send(
        self,
        rows: list[EnqueueRow],
        send: Send,
        placed: Mapping[str, int] | None,
        chosen: frozenset[str] = frozenset(),
    ) -> list[Enqueued]:
        """``rows`` to their shards; those a shard refused for a stale generation sent
        again after the record is read anew, each at most :data:`RESENDS` times (the
        rows a shard took are not sent again: under the new record they may be routed
        elsewhere). ``placed`` and ``chosen`` as :meth:`Shards.by_key` takes them."""
        # The shards of the jobs placed, kept as shards: their places change with the
        # record.
        held = {i: self.route.all[at] for i, at in (placed or {}).items()}

        def where() -> dict[str, int]:
            return {i: s.index for i, s in held.items() if s in self.route.all}

        async def checked(shard: Shard, sub: list[EnqueueRow]) -> list[Enqueued | None]:
            try:
                return list(await send(shard, sub))
            except Resharded:
                return [None] * len(sub)

        out = await self.route.by_key(rows, checked, where(), chosen)
        for attempt in range(RESENDS):
            left = [i for i, e in enumerate(out) if e is None]
            if not left:
                break
            if attempt:
                await anyio.sleep(0.01)
            await self.reread()
            again = await self.route.by_key([rows[i] for i in left], checked, where(), chosen)
            for i, e in zip(left, again, strict=True):
                out[i] = e
        else:
            if any(e is None for e in out):
                raise RedisRefused(
                    f"enqueue refused {RESENDS} times: the shards of namespace"
                    f" {self.route.all[0].keys.namespace!r} hold other shard records than"
                    f" shard 0 ({self.route.record.text()}): run 'rota shards resize'"
                    " again to finish the change"
                )
        return [e for e in out if e is not None]

    async def close(self) -> None:
        for shard in reversed(list(self.known.values())):
            await shard.close()

    def shards(self) -> Sequence[Shard]:
        return self.route.all
