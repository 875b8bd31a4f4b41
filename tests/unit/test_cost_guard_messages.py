"""The per-job cost guard's verdicts name the figure and the part of the worker that grew."""

from __future__ import annotations

from bench.cost import FAILING_RATIO, TOLERANCE, failing_over, over_budget
from bench.fair_cost import keyed_over


def test_the_failing_guard_names_the_figure_and_the_part() -> None:
    parts = {"attempt": 60.0, "fetch": 80.0, "finish": 60.0, "retry": 3.0, "other": 50.0}
    noop = {"worker": 256.0, "redis": 25.0, **parts}
    assert failing_over({"noop": noop, "failing": {**noop, "worker": 512.0}}) == []
    failing = {**noop, "worker": 1042.0, "redis": 40.0, "attempt": 779.0}
    (worker,) = failing_over({"noop": noop, "failing": failing})
    assert worker.startswith("worker: 1042.0 per failing job, 4.07x the 256.0 of a no-op job")
    assert worker.endswith(f"(at most {FAILING_RATIO:g}x) (most in attempt: 60.0 -> 779.0)")


def test_the_guard_names_a_figure_past_its_tolerance() -> None:
    allowed = {"worker": 600.0, "redis": 24.0}
    assert over_budget({"worker": 600 * (1 + TOLERANCE), "redis": 24.0}, allowed) == []
    (worker,) = over_budget({"worker": 661.0, "redis": 24.0}, allowed)
    assert worker.startswith("worker: 661.0 per no-op job, budget 600.0 (+10.2%")
    (redis_side,) = over_budget({"worker": 600.0, "redis": 26.5}, allowed)
    assert redis_side.startswith("redis: 26.5 per no-op job")


def test_the_guard_names_the_part_of_the_worker_that_grew() -> None:
    parts = {"attempt": 60.0, "fetch": 80.0, "finish": 60.0, "retry": 3.0, "other": 50.0}
    allowed = {"worker": 256.0, "redis": 24.0, **parts}
    grown = {"worker": 300.0, "redis": 24.0, **parts, "attempt": 104.0}
    (worker,) = over_budget(grown, allowed)
    assert "(most in attempt: 60.0 -> 104.0)" in worker


def test_the_keyed_guard_allows_no_command_more() -> None:
    assert keyed_over({"keyed": 9.5, "plain": 6.1}, 9.5) == []
    (line,) = keyed_over({"keyed": 10.5, "plain": 6.1}, 9.5)
    assert line.startswith("redis: 10.5 commands per keyed job, budget 9.5 (6.1 per job without")
