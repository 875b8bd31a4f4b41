"""Side-by-side benchmark of rota and other Redis job queues (see docs/performance.md).

Run with ``make bench`` (full) or ``make bench-smoke`` (tiny). This package must import
with the standard library only: it runs both in the project's virtual environment and in
the peers' one (``bench/.venv-peers``).
"""

import math


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of 0 would run nothing, or
    wait forever for jobs that never come)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more (nan or inf would sleep
    forever or print nan for every rate)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a finite number of seconds, 0 or more, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: :func:`seconds` above 0 (a rate over 0 seconds divides by 0)."""
    value = seconds(text)
    if value <= 0:
        raise ValueError(f"must be above 0 seconds, got {text}")
    return value
