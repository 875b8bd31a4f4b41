"""Side-by-side benchmark of rota and other Redis job queues (see docs/performance.md).

Run with ``make bench`` (full) or ``make bench-smoke`` (tiny). This package must import
with the standard library only: it runs both in the project's virtual environment and in
the peers' one (``bench/.venv-peers``).
"""
