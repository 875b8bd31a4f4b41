"""bench.many_names, bench.memory_soak and bench.isolation run to the end and print their
figures.

Tiny runs on private servers: nothing here is about the figures themselves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench import debounce_cost, deep_pages, many_names, memory_soak


def test_many_names_measures_each_count_of_names(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--names", "1,20", "--jobs", "200", "--reps", "1", "--idle", "0.5"]
    assert many_names.main(argv) == 0
    out = capsys.readouterr().out
    for k in (1, 20):
        row = re.search(rf"^\| {k} \| [\d,]+ \(\d+%\) \| ([\d.]+) \| ([\d.]+) \|", out, re.M)
        assert row, out
        assert float(row[1]) > 0 and float(row[2]) > 0


def test_memory_soak_reports_the_memory_of_a_sustained_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert memory_soak.main(["--seconds", "5", "--backlog", "2000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^[\d,]+ jobs completed in \d+ s", out, re.M), out
    assert "used_memory at each quarter" in out
    assert "complete jobs kept ({ns}:complete): " in out


def test_debounce_cost_prints_a_row_per_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert debounce_cost.main(["--jobs", "50", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    for kind in ("plain", "debounced, new key", "debounced, absorbed (replace)"):
        row = re.search(rf"^\| {re.escape(kind)} \| ([\d.]+) \| [\d.]+x \| ([\d.]+) \|", out, re.M)
        assert row, out
        assert float(row[1]) > 0 and float(row[2]) > 0


def test_isolation_runs_both_paths() -> None:
    """In a process of its own: it sets the logging of the process it runs in."""
    argv = ["--cpu-jobs", "4", "--cpu-ms", "20", "--ticks-per-s", "50", "--json"]
    done = _own_process("bench.isolation", *argv)
    rows = json.loads(done.stdout)["rows"]
    assert [r["path"] for r in rows] == ["thread", "isolated"]
    assert all(r["cpu_jobs_per_s"] > 0 and r["ticks"] > 0 for r in rows), rows


def test_bench_fair_measures_keyed_runs_against_plain_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m bench.fair`` (docs/performance.md, "Fair keys"): every workload runs,
    and the ratios to plain are printed."""
    from bench import fair

    assert fair.main(["--jobs", "200", "--idle-keys", "200", "--keys", "10", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    for ratio in ("keyed/plain", "idle/plain", "wide/plain-wide"):
        assert re.search(rf"^{ratio}: [\d.]+%$", out, re.M), out


def test_bench_fair_checks_judge_a_flood_and_weights() -> None:
    """``python -m bench.fair_checks`` (docs/fair-keys.md): both checks run with worker
    processes and print their figures (tiny runs: the figures mean nothing here)."""
    argv = ["--flood", "3000", "--keys", "20", "--per-key", "400", "--window", "1"]
    done = _own_process("bench.fair_checks", *argv)
    assert re.search(r"^  small keys that started: 20$", done.stdout, re.M), done.stdout
    assert re.search(r"^  jobs run twice: 0$", done.stdout, re.M), done.stdout
    for key in ("w1", "w2", "w4"):
        assert re.search(rf"^  {key}: share: [\d.]+ \(want ", done.stdout, re.M), done.stdout


def test_deep_pages_prints_a_row_per_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert deep_pages.main(["--jobs", "400", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    for page in ("scheduled", "retry", "dead", "queue", "queue, newest first"):
        row = re.search(rf"^\| {re.escape(page)} \| 200 \| [\d.]+ \| (\d+) \| (\d+) \|", out, re.M)
        assert row, out
        assert int(row[1]) > 0 and int(row[2]) > 0


def test_ordered_cost_prints_both_kinds() -> None:
    """``python -m bench.ordered_cost`` (docs/performance.md, "Ordered names"), in a
    process of its own: it sets the logging of the process it runs in."""
    done = _own_process("bench.ordered_cost", "--jobs", "200", "--reps", "1")
    for kind in ("spread", "ordered"):
        row = re.search(rf"^\| {kind} \| ([\d.]+) \| ([\d,]+) \(", done.stdout, re.M)
        assert row, done.stdout
        assert float(row[1]) > 0 and int(row[2].replace(",", "")) > 0


def _own_process(module: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m module argv`` from the repository, finished with exit code 0."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-m", module, *argv],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done
