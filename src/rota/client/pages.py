"""Exact pages over a namespace of K shards: the jobs at a global place ``offset`` of a
job set, of the kept complete jobs or of a queue, found without reading every shard up
to ``offset``.

Each shard holds its part of the sequence in order (a sorted set by score, a queue's
list by enqueue time: :class:`rota.client.queue_pages.ListSide`), so the global page at
``offset`` m starts where each shard's "cut" c_i is, Σ c_i = m: a K-way selection.
:func:`cuts` keeps, for each shard, a window [lo_i, hi_i] that holds its cut (at first
what the sizes allow).
A step reads a pivot in each shard's window (one round trip to all shards): where the
cut would be were the entries left spread evenly, every other step the middle. It then
finds each pivot's place in every other shard, all at once: a sorted set answers by
``ZCOUNT`` in one round trip, then by rank among equal scores (``PROBES`` ranks a round
trip); a list by the binary search that defines its order (``DEPTH`` levels a read).
Whether a pivot is among the first m closes one side of every window: an even spread
closes them around the pivots in a step or two, and the middle steps halve them
whatever the spread. Once the windows hold at most ``WINDOW`` entries in all, one read
of each window and of the ``count`` entries after it gives the cuts and the page,
merged. A page of N entries at any depth so costs at most 2·⌈log2(N / WINDOW)⌉ + 2
steps, of 2 + ⌈log_(PROBES+1)(N)⌉ round trips for a set (2 + 2·⌈log2(N) / DEPTH⌉ for a
list, whose reads take two: the ids, then their times): measured in docs/web.md.
Entries that come or go meanwhile can shift a page by as many places, never stop the
search (every step narrows each window). One shard keeps its one
read (the callers do not come here).

The global order is total: a sorted set's (score, id as bytes, shard), the order
``ZRANGE`` gives one shard (equal scores by id); newest (or soonest) first is exactly its
reverse, as ``ZREVRANGE`` is. A queue's is (time, shard, place), its time as below.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from rota.client.rules import gather
from rota.protocol.job import JobSet, reply_text
from rota.wire.conn import score_pairs

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = [
    "PROBES",
    "WINDOW",
    "Cost",
    "Key",
    "Side",
    "ZSetSide",
    "cuts",
    "job_set_page",
    "page",
    "runs",
    "set_page",
]

#: The most entries the windows hold in all before they are read whole, and the ranks one
#: search reads a round trip.
WINDOW: Final = 256
PROBES: Final = 16

Key = tuple[Any, ...]


class Cost:
    """What a page cost: round trips one after another (all shards at once count one),
    and commands sent."""

    def __init__(self) -> None:
        self.rounds = 0
        self.commands = 0


class Side:
    """One shard's part of the sequence, read by position (0: the first in order)."""

    #: Round trips one read of entries takes.
    ROUNDS = 1

    def __init__(self, shard: Shard, cost: Cost) -> None:
        self.shard, self.index, self.cost = shard, shard.index, cost
        self.size = 0
        self.ids: dict[int, str] = {}

    async def _send(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        self.cost.commands += len(commands)
        return await self.shard.conn.execute_many(commands) if commands else []

    async def keys(self, positions: Sequence[int]) -> tuple[dict[int, Key], int]:
        """The keys of ``positions`` (the order's sort key of each entry), and the round
        trips that took."""
        raise NotImplementedError

    async def span(self, lo: int, hi: int) -> dict[int, Key]:
        """The keys of positions ``lo`` to ``hi`` (not included)."""
        return (await self.keys(range(lo, min(hi, self.size))))[0]

    async def rank(self, x: Key, lo: int, hi: int) -> tuple[int, int]:
        """How many of this shard's entries in ``[lo, hi)`` come before ``x`` (none
        equals it: it is another shard's) plus ``lo``, and the round trips taken."""
        rounds = 0
        while hi > lo:
            whole = hi - lo <= PROBES
            step = range(lo, hi) if whole else _probes(lo, hi)
            got, took = await self.keys(step)
            rounds += took
            after = next((p for p in step if got[p] > x), None)
            if whole:
                return (hi if after is None else after), rounds
            last_before = max((p for p in step if got[p] < x), default=lo - 1)
            lo, hi = last_before + 1, (hi if after is None else after)
        return lo, rounds


def _probes(lo: int, hi: int) -> list[int]:
    """``PROBES`` positions spread evenly over ``[lo, hi)``."""
    return sorted({lo + (hi - lo) * (k + 1) // (PROBES + 1) for k in range(PROBES)})


class ZSetSide(Side):
    """A sorted set's entries (``window``: scores from, to, as ZCOUNT takes them),
    ascending by (score, id bytes); keys (score, id bytes, shard)."""

    def __init__(self, shard: Shard, cost: Cost, key: str, window: tuple[Any, Any]) -> None:
        super().__init__(shard, cost)
        self.key, self.window, self.base = key, window, 0

    async def start(self) -> None:
        lo, hi = self.window
        below = f"({lo}" if lo != "-inf" else "-inf"
        before, size = await self._send(
            [("ZCOUNT", self.key, "-inf", below), ("ZCOUNT", self.key, lo, hi)]
        )
        self.base, self.size = _count(before) if lo != "-inf" else 0, _count(size)

    async def keys(self, positions: Sequence[int]) -> tuple[dict[int, Key], int]:
        ranges = runs(positions)
        replies = await self._send(
            [
                ("ZRANGE", self.key, self.base + a, self.base + b - 1, "WITHSCORES")
                for a, b in ranges
            ]
        )
        out: dict[int, Key] = {}
        for (a, _), reply in zip(ranges, replies, strict=True):
            for n, (member, score) in enumerate(_pairs(reply)):
                out[a + n] = (score, member, self.index)
                self.ids[a + n] = reply_text(member)
        for p in positions:  # gone since (the set shrank): last in the order
            out.setdefault(p, (math.inf, b"\xff" * 64, self.index))
        return out, 1

    async def rank(self, x: Key, lo: int, hi: int) -> tuple[int, int]:
        """By score first: the entries scored below and up to ``x``'s, in one round trip;
        among equal scores by rank (see :meth:`Side.rank`)."""
        score = _score_text(x[0])
        below, upto = await self._send(
            [("ZCOUNT", self.key, "-inf", f"({score}"), ("ZCOUNT", self.key, "-inf", score)]
        )
        first, last = _count(below) - self.base, _count(upto) - self.base
        lo2, hi2 = max(lo, min(hi, first)), min(hi, max(lo, last))
        found, rounds = await super().rank(x, lo2, hi2)
        return found, rounds + 1


def runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """``positions`` as runs of consecutive ones, [from, to)."""
    out: list[tuple[int, int]] = []
    for p in sorted(set(positions)):
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return out


def _pairs(reply: Any) -> list[tuple[bytes, float]]:
    """A ``WITHSCORES`` reply as (member bytes, score); an error reply is raised."""
    return [(_bytes(m), float(s)) for m, s in score_pairs(reply)]


def _bytes(member: Any) -> bytes:
    return member if isinstance(member, bytes) else str(member).encode("utf-8", "surrogateescape")


def _count(reply: Any) -> int:
    if isinstance(reply, Exception):
        raise reply
    return int(reply)


def _score_text(score: float) -> str:
    """A score as ZCOUNT reads it back exactly."""
    return "+inf" if score == math.inf else "-inf" if score == -math.inf else repr(score)


async def cuts(sides: Sequence[Side], m: int, cost: Cost) -> list[tuple[int, int]]:
    """Windows [lo, hi] of each shard's cut for the first ``m`` entries in the order,
    narrowed until they hold at most :data:`WINDOW` entries (see the module)."""
    total = sum(s.size for s in sides)
    m = max(0, min(m, total))
    lo = [max(0, m - (total - s.size)) for s in sides]
    hi = [min(s.size, m) for s in sides]
    step = 0
    while (width := sum(h - low for low, h in zip(lo, hi, strict=True))) > WINDOW:
        moving = [j for j in range(len(sides)) if hi[j] > lo[j]]
        # Every other step each pivot is where the cut would be were the entries left
        # spread evenly (its pivots then fall either side of the cuts, and the windows
        # close around them); the steps between take the middle, so that the windows
        # halve whatever the spread.
        share = (m - sum(lo)) / width if step % 2 == 0 else 0.5
        mids = {j: min(hi[j] - 1, lo[j] + int(share * (hi[j] - lo[j]))) for j in moving}
        step += 1
        read = await gather([functools.partial(sides[j].keys, [mids[j]]) for j in moving])
        cost.rounds += max(took for _, took in read)
        pivots = {j: got[mids[j]] for j, (got, _) in zip(moving, read, strict=True)}
        asks = [(j, i) for j in moving for i in range(len(sides)) if i != j]
        # Each pivot's place in every other shard's window and one place either side of
        # it (whether the pivot lies beyond the window), all at once.
        found = await gather(
            [
                functools.partial(
                    sides[i].rank,
                    pivots[j],
                    max(0, lo[i] - 1),
                    min(sides[i].size, hi[i] + 1),
                )
                for j, i in asks
            ]
        )
        cost.rounds += max((took for _, took in found), default=0)
        ranks = {ask: r for ask, (r, _) in zip(asks, found, strict=True)}
        for j in moving:
            mine = {i: ranks[(j, i)] for i in range(len(sides)) if i != j}
            if any(r < lo[i] for i, r in mine.items()):
                inside = True  # before an entry known to be among the first m
            elif any(r > hi[i] for i, r in mine.items()):
                inside = False  # after an entry known to be beyond them
            else:
                inside = mids[j] + sum(mine.values()) < m
            for i, r in mine.items():
                lo[i], hi[i] = (max(lo[i], r), hi[i]) if inside else (lo[i], min(hi[i], r))
            lo[j], hi[j] = (mids[j] + 1, hi[j]) if inside else (lo[j], mids[j])
        # (A shard that changed meanwhile may cross its bounds: keep a window.)
        lo = [min(low, h) for low, h in zip(lo, hi, strict=True)]
    return list(zip(lo, hi, strict=True))


async def page(
    sides: Sequence[Side], offset: int, count: int, newest: bool, cost: Cost
) -> list[tuple[int, int, Key]]:
    """The entries at ``offset`` to ``offset + count`` in the order (newest first: its
    reverse) as (shard's index, position, key), after each side's ``size`` is read."""
    total = sum(s.size for s in sides)
    if newest:
        stop = total - offset
        start = max(0, stop - count)
    else:
        start, stop = offset, min(total, offset + count)
    if stop <= start:
        return []
    windows = await cuts(sides, start, cost)
    spans = await gather(
        [
            functools.partial(s.span, a, b + stop - start)
            for s, (a, b) in zip(sides, windows, strict=True)
        ]
    )
    cost.rounds += max(s.ROUNDS for s in sides)
    merged = sorted(
        (key, s.index, p) for s, got in zip(sides, spans, strict=True) for p, key in got.items()
    )
    before = start - sum(a for a, _ in windows)
    rows = [(i, p, key) for key, i, p in merged[before : before + stop - start]]
    return rows[::-1] if newest else rows


async def set_page(
    shards: Sequence[Shard],
    key: Callable[[Shard], str],
    offset: int,
    count: int,
    *,
    newest: bool,
    window: tuple[Any, Any] = ("-inf", "+inf"),
    cost: Cost | None = None,
) -> tuple[int, list[tuple[int, str, float]]]:
    """How many entries the sorted set ``key`` holds within ``window`` (scores) over
    ``shards``, and those at ``offset`` to ``offset + count`` in its order (ascending,
    or its reverse ``newest``) as (shard's index, id, score)."""
    cost = cost or Cost()
    sides = [ZSetSide(s, cost, key(s), window) for s in shards]
    await gather([s.start for s in sides])
    cost.rounds += 1
    rows = await page(sides, offset, count, newest, cost)
    got = [(i, sides[i].ids.get(p), key[0]) for i, p, key in rows]
    return sum(s.size for s in sides), [(i, j, score) for i, j, score in got if j is not None]


async def job_set_page(
    shards: Sequence[Shard], which: JobSet, offset: int, count: int, cost: Cost | None = None
) -> tuple[int, list[tuple[int, str]]]:
    """:meth:`Admin.page` over several shards: the size of set ``which`` and its page as
    (shard's index, id), the dead set newest first."""
    key = lambda s: s.set_key(which)  # noqa: E731
    total, rows = await set_page(shards, key, offset, count, newest=which == "dead", cost=cost)
    return total, [(i, j) for i, j, _ in rows]
