"""The benchmark's smoke run finishes and writes a table with a row for rota.

Tiny job counts, one repetition, through the runner's Python entry (what ``make
bench-smoke`` runs). Without bench/.venv-peers it runs rota alone. Nothing here is about
speed: only that every workload ran and was reported, the group workload (rota only)
with its callback run once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_bench_smoke_reports_every_workload_for_rota(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "BENCH_"))}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    table = (tmp_path / "results.md").read_text()
    rota_rows = [line for line in table.splitlines() if line.startswith("| rota |")]
    # throughput, enqueue, latency, cost and scale tables each have a row for rota
    assert len(rota_rows) >= 5, table
    assert not any("failed" in row for row in rota_rows), table

    results = json.loads((tmp_path / "results.json").read_text())["results"]
    rota = [r for r in results if r["system"] == "rota"]
    workloads = {r["workload"] for r in rota}
    assert workloads >= {"noop c=10", "noop c=100", "sleep c=100", "enqueue one", "latency"}
    assert "group" in workloads
    assert all(r["ok"] for r in rota), [r["error"] for r in rota if not r["ok"]]

    # the group workload: rota only, its callback ran once, and it has its table
    assert {r["system"] for r in results if r["workload"] == "group"} == {"rota"}
    (group,) = [r["metrics"] for r in rota if r["workload"] == "group"]
    assert group["callback_runs"] == [1], group
    assert group["group_run_commands"] > 0 and group["plain_run_commands"] > 0, group
    assert "## Workflows" in table and "| group + callback |" in table, table
