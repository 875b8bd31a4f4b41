"""The guard against slowdowns: a no-op job may not cost more than bench/budget.toml says.

Wall-clock figures move by up to 2x on this kind of host, so the guard counts what does
not move (see bench/cost.py): Python calls in the pool's process and commands Redis
runs, per no-op job. It fails, naming the figure, past +10 % of the recorded budget.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench.cost import TOLERANCE, budget, over_budget

from tests.cli_helpers import REPO, rota_env

pytestmark = pytest.mark.timeout(120)


def test_a_noop_job_costs_no_more_than_its_budget() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.cost", "--json"],
        cwd=REPO,
        env=rota_env(),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert over_budget(measured, budget()) == [], measured


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
