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
from bench.cost import budget, failing_over, over_budget
from bench.fair_cost import keyed_budget, keyed_over

from tests.cli_helpers import REPO, rota_env

pytestmark = pytest.mark.timeout(120)


def _measured(*flags: str, module: str = "bench.cost") -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", module, "--json", *flags],
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


def test_a_keyed_job_costs_no_more_commands_than_its_budget() -> None:
    """Fair keys: the scripts' commands per keyed job, fetched in batches over many keys
    as a busy pool fetches them, held to the recorded figure (within a hundredth)."""
    measured = _measured(module="bench.fair_cost")
    assert keyed_over(measured, keyed_budget()) == [], measured
