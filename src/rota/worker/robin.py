"""Smooth weighted round robin over job names (the interleaving nginx uses).

With weights 4 and 1 it yields A A B A A, A A B A A, ...: deterministic, spread out, and
no name with a weight waits longer than one cycle.

Each step adds its weight to every name's counter, picks the name with the highest
counter (the first such name on a tie) and takes the total weight off that one. Names of
the same weight gain the same amount at every step, so their order among themselves
changes only when one is picked: each weight keeps its names in a heap, and a step looks
at the top of each heap only. A pool with hundreds of names of a few priorities picks
the next name in a few operations, not one per name, and in the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

__all__ = ["Robin"]


class Robin:
    __slots__ = ("_groups", "_names", "_step", "_total")

    def __init__(self, weights: Mapping[str, int]) -> None:
        if not weights:
            raise ValueError("a round robin needs at least one name")
        if any(w < 1 for w in weights.values()):
            raise ValueError("weights must be positive")
        self._names = list(weights)
        self._total = sum(weights.values())
        self._step = 0
        # weight -> heap of (-base, index): a name's counter is base + step * weight.
        by_weight: dict[int, list[tuple[int, int]]] = {}
        for i, name in enumerate(self._names):
            by_weight.setdefault(weights[name], []).append((0, i))
        self._groups = list(by_weight.items())
        for _, heap in self._groups:
            heapq.heapify(heap)

    def next(self) -> str:
        self._step += 1
        step = self._step
        best_heap: list[tuple[int, int]] | None = None
        best_value = 0
        best_index = 0
        for w, heap in self._groups:
            neg_base, i = heap[0]
            value = step * w - neg_base
            if best_heap is None or value > best_value or (value == best_value and i < best_index):
                best_heap, best_value, best_index = heap, value, i
        assert best_heap is not None
        neg_base, i = best_heap[0]
        heapq.heapreplace(best_heap, (neg_base + self._total, i))
        return self._names[i]

    def take(self, n: int) -> list[str]:
        """The next ``n`` names, in visiting order."""
        return [self.next() for _ in range(n)]
