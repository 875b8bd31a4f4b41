"""Side-by-side benchmark of rota and other Redis job queues (see docs/performance.md).

Run with ``make bench`` (full) or ``make bench-smoke`` (tiny). This package must import
with the standard library only: it runs both in the project's virtual environment and in
the peers' one (``bench/.venv-peers``).
"""


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of 0 would run nothing, or
    wait forever for jobs that never come)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value
