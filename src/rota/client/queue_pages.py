"""A queue's page over K shards (see :mod:`rota.client.pages`): its jobs by position in
each shard's list, and the order they merge in (see :class:`ListSide`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import anyio

from rota.client.pages import Cost, Key, Side, page, runs
from rota.client.rules import gather
from rota.protocol.job import count_of, opt_int, reply_text

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = ["DEPTH", "ListSide", "queue_page"]

#: The levels of a binary search of a queue's list one read brings (2^DEPTH - 1 jobs).
DEPTH: Final = 5


class ListSide(Side):
    """A queue's list from its oldest end (the next to run first): keys (time, shard,
    place). A list is in enqueue order but where a job went back (a promoted scheduled
    or retried job is pushed with its first enqueue time; a requeued one at the front),
    so a job's time is the one a binary search of its list by time places it at: the
    least time c for which the search for the first job enqueued after c goes past it.
    That is its own enqueue time where its list is in order, never below the time of a
    job before it in its list, and it is read from the ~log2(n) jobs that search
    visits. An ``enqueued_at`` that is no whole number of ms (missing, text, NaN, 1e300,
    a record that is no hash) reads as 0."""

    ROUNDS = 2

    def __init__(self, shard: Shard, cost: Cost, key: str) -> None:
        super().__init__(shard, cost)
        self.key = key
        self.raw: dict[int, int] = {}
        self.pending: dict[int, anyio.Event] = {}

    async def _read(self, positions: Sequence[int]) -> int:
        """Read the ids and enqueue times of ``positions`` not read yet: round trips."""
        wanted = {p for p in positions if p not in self.raw and 0 <= p < self.size}
        if not wanted:
            return 0
        # The searches of one step start from the same jobs: one of them reads each.
        others = {self.pending[p] for p in wanted if p in self.pending}
        mine = sorted(p for p in wanted if p not in self.pending)
        done = anyio.Event()
        self.pending.update(dict.fromkeys(mine, done))
        try:
            await self._fetch(mine)
        finally:
            done.set()
            for p in mine:
                del self.pending[p]
        for other in others:
            await other.wait()
        return 2

    async def _fetch(self, wanted: list[int]) -> None:
        """Read the ids and enqueue times of ``wanted``: two round trips."""
        if not wanted:
            return
        ranges = runs(wanted)
        cmds = [
            ("LINDEX", self.key, -a - 1) if b == a + 1 else ("LRANGE", self.key, -b, -a - 1)
            for a, b in ranges
        ]
        got: dict[int, str] = {}
        for (a, b), reply in zip(ranges, await self._send(cmds), strict=True):
            if b == a + 1:
                if reply is not None and not isinstance(reply, Exception):
                    got[a] = reply_text(reply)
            elif isinstance(reply, list):
                for n, i in enumerate(reversed(reply)):
                    got[a + n] = reply_text(i)
        ids = list(got.items())
        times = await self._send([("HGET", self.shard.keys.job(i), "enqueued_at") for _, i in ids])
        for (p, i), t in zip(ids, times, strict=True):
            self.ids[p] = i
            self.raw[p] = 0 if isinstance(t, Exception) else (opt_int(t) or 0)
        for p in wanted:  # gone since (the list shrank)
            self.raw.setdefault(p, 0)

    async def keys(self, positions: Sequence[int]) -> tuple[dict[int, Key], int]:
        paths = {p: _path(self.size, p) for p in positions}
        rounds = await self._read([v for path in paths.values() for v, _ in path])
        return {p: (_placed(path, self.raw), self.index, p) for p, path in paths.items()}, rounds

    async def rank(self, x: Key, lo: int, hi: int) -> tuple[int, int]:
        """The jobs placed before ``x`` are those the search of this list for the first
        job enqueued after its time passes (after or at it, for a later shard's): the
        search itself, :data:`DEPTH` of its levels a read, clamped to ``[lo, hi]``."""
        c = x[0] if self.index < x[1] else x[0] - 1
        at, end, rounds = 0, self.size, 0
        while at < end:
            rounds += await self._read(_levels(at, end, DEPTH))
            for _ in range(DEPTH):
                if at >= end:
                    break
                mid = (at + end) // 2
                at, end = (mid + 1, end) if self.raw[mid] <= c else (at, mid)
        return max(lo, min(hi, at)), rounds


def _levels(lo: int, hi: int, depth: int) -> list[int]:
    """The places a binary search of ``[lo, hi)`` may visit in its next ``depth`` steps."""
    out, spans = [], [(lo, hi)]
    for _ in range(depth):
        below = []
        for a, b in spans:
            if a < b:
                mid = (a + b) // 2
                out.append(mid)
                below += [(a, mid), (mid + 1, b)]
        spans = below
    return out


def _path(n: int, p: int) -> list[tuple[int, bool]]:
    """The places a binary search of ``n`` entries visits on its way to the gap after
    ``p``, each with whether it goes on to the right there."""
    lo, hi, out = 0, n, []
    while lo < hi:
        mid = (lo + hi) // 2
        right = mid <= p
        out.append((mid, right))
        lo, hi = (mid + 1, hi) if right else (lo, mid)
    return out


def _placed(path: list[tuple[int, bool]], raw: dict[int, int]) -> int:
    """The least time c for which the search (go right where a job's time is at most c)
    ends after the place ``path`` leads to (see :class:`ListSide`)."""

    def passes(c: int) -> bool:
        for v, right in path:
            goes = raw[v] <= c
            if goes != right:
                return goes  # ends further right (passes) or further left (does not)
        return True

    return min(c for c in {raw[v] for v, _ in path} if passes(c))


async def queue_page(
    shards: Sequence[Shard],
    name: str,
    offset: int,
    count: int,
    *,
    newest: bool,
    cost: Cost | None = None,
) -> tuple[list[int], bool, int, list[tuple[int, str]]]:
    """A page of ``name``'s queue over ``shards`` in the order of :class:`ListSide`
    (newest first: its reverse): each shard's length, whether any has it paused, its
    jobs with a fair key (in their keys' lists, not in the queue's: counted, not
    listed, as for one shard), and the page as (shard's index, id)."""
    cost = cost or Cost()
    sides = [ListSide(s, cost, s.keys.queue(name)) for s in shards]

    async def start(side: ListSide) -> tuple[bool, int]:
        k = side.shard.keys
        size, paused, keyed = await side._send(
            [("LLEN", side.key), ("SISMEMBER", k.paused, name), ("HGET", k.fair(name), "n")]
        )
        side.size = 0 if isinstance(size, Exception) else int(size)
        return paused == 1, count_of(keyed)

    heads = await gather([functools.partial(start, s) for s in sides])
    cost.rounds += 1
    rows = await page(sides, offset, count, newest, cost)
    chosen = [(i, sides[i].ids.get(p)) for i, p, _ in rows]
    return (
        [s.size for s in sides],
        any(p for p, _ in heads),
        sum(n for _, n in heads),
        [(i, j) for i, j in chosen if j is not None],
    )
