"""Smooth weighted round robin over job names (the interleaving nginx uses).

With weights 4 and 1 it yields A A B A A, A A B A A, ...: deterministic, spread out, and
no name with a weight waits longer than one cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Robin"]


class Robin:
    __slots__ = ("_current", "_names", "_total", "_weights")

    def __init__(self, weights: Mapping[str, int]) -> None:
        if not weights:
            raise ValueError("a round robin needs at least one name")
        if any(w < 1 for w in weights.values()):
            raise ValueError("weights must be positive")
        self._names = list(weights)
        self._weights = [weights[n] for n in self._names]
        self._current = [0] * len(self._names)
        self._total = sum(self._weights)

    def next(self) -> str:
        current, weights = self._current, self._weights
        best = 0
        for i, w in enumerate(weights):
            current[i] += w
            if current[i] > current[best]:
                best = i
        current[best] -= self._total
        return self._names[best]

    def take(self, n: int) -> list[str]:
        """The next ``n`` names, in visiting order."""
        return [self.next() for _ in range(n)]
