"""How many rounds each of a pool's background loops has begun and ended.

A pool's fetcher, heartbeat, reaper and scheduler each run a loop of rounds: a fetch
(with the wait on the wake lists before it), a beat, a reaper pass, a scheduler tick.
Something that must *not* happen (a paused job run, a scheduled job started early, a
replica's job handed out) shows only as the absence of an effect; that absence means
something only once the loop that would have caused it has run a whole round that began
after the moment of interest. These counts are what tests and operators wait on for that
(e.g. "every fetcher of the pool ended a round it began after now"), instead of a fixed
sleep that a slow host turns into a test of nothing. A loop that waits between rounds
(a fetcher on its wake lists, a scheduler until its next due time) leaves a nudge that
ends the wait now, as a wake token would: a waiter need not sit out the timeout.

Counts are kept per pool id, kind and shard, in memory, as long as one of the pool's
loops holds them (a nudge, while its loop runs); nothing here talks to Redis.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable

__all__ = ["BEAT", "FETCH", "REAP", "TICK", "Rounds", "every_pool", "rounds_of"]

FETCH = "fetch"
BEAT = "beat"
REAP = "reap"
TICK = "tick"


class Rounds:
    """The rounds begun and ended by each loop of one pool, by (kind, shard)."""

    def __init__(self) -> None:
        self.begun: Counter[tuple[str, int]] = Counter()
        self.ended: Counter[tuple[str, int]] = Counter()
        #: What ends the wait before a loop's next round, by (kind, shard).
        self.nudges: dict[tuple[str, int], Callable[[], None]] = {}

    def begin(self, kind: str, shard: int) -> None:
        self.begun[kind, shard] += 1

    def end(self, kind: str, shard: int) -> None:
        """A round ends with its work done (one that Redis refused begins again: the
        mark then waits for one round more, never less)."""
        self.ended[kind, shard] += 1

    def mark(self, kind: str) -> dict[int, int]:
        """The rounds of ``kind`` begun so far, by shard: :meth:`since` compares."""
        return {shard: n for (k, shard), n in self.begun.items() if k == kind}

    def since(self, kind: str, mark: dict[int, int], n: int = 1) -> bool:
        """Whether the loop of ``kind`` of every shard in ``mark`` has ended ``n``
        rounds that began after the mark was taken."""
        return all(self.ended[kind, shard] >= begun + n for shard, begun in mark.items())

    def nudge(self, kind: str) -> None:
        """End the waits of the loops of ``kind`` now: their next round begins."""
        for (k, _), nudge in list(self.nudges.items()):
            if k == kind:
                nudge()


_POOLS: weakref.WeakValueDictionary[str, Rounds] = weakref.WeakValueDictionary()


def rounds_of(pool_id: str) -> Rounds:
    """The rounds of pool ``pool_id`` (kept while a loop of the pool holds them)."""
    rounds = _POOLS.get(pool_id)
    if rounds is None:
        rounds = _POOLS[pool_id] = Rounds()
    return rounds


def every_pool() -> list[Rounds]:
    """The rounds of every pool whose fetchers run in this process."""
    return [r for r in _POOLS.values() if any(k == FETCH for k, _ in r.nudges)]
