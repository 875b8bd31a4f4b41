"""The CPU-bound handler of bench/isolation.py, in a module of its own: an isolated
handler is imported by its child process as ``bench.isolation_jobs:cpu``."""

from __future__ import annotations

import time

__all__ = ["calibrate", "cpu"]


def cpu(rounds: int) -> int:
    """A fixed amount of pure-Python work (it holds the interpreter's lock throughout,
    as a parser or a numeric loop does): ``rounds`` thousand additions."""
    n = 0
    for _ in range(rounds):
        for _ in range(1000):
            n += 1
    return n


def calibrate(ms: float) -> int:
    """The rounds of :func:`cpu` that take about ``ms`` milliseconds on this machine,
    alone (the best of three)."""
    best = min(_timed(200) for _ in range(3))
    return max(1, round(200 * ms / 1000 / best))


def _timed(rounds: int) -> float:
    begun = time.perf_counter()
    cpu(rounds)
    return time.perf_counter() - begun
