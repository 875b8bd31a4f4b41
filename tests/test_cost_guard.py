"""The guard against slowdowns: a no-op job may not cost more than bench/budget.toml says.

Wall-clock figures move by up to 2x on this kind of host, so the guard counts what does
not move (see bench/cost.py): Python calls in the pool's process and commands Redis
runs, per no-op job. It fails, naming the figure, past +10 % of the recorded budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from bench.cost import FAILING_RATIO, TOLERANCE, budget, failing_over, over_budget

from tests.cli_helpers import REPO, rota_env

pytestmark = pytest.mark.timeout(120)


def _measured(*flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.cost", "--json", *flags],
        cwd=REPO,
        env=rota_env(),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def test_a_noop_job_costs_no_more_than_its_budget() -> None:
    measured = _measured()
    assert over_budget(measured, budget()) == [], measured


def test_a_failing_job_costs_at_most_twice_a_noop_job() -> None:
    """When a service the jobs call is down every job fails: a pool that slowed down
    then would fall behind just as its backlog grows. A job that raises (its traceback
    kept in its log) costs at most twice a no-op job, in calls and in commands."""
    figures = _measured("--failing")
    assert failing_over(figures) == [], figures


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
