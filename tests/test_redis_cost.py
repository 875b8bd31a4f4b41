"""bench.redis_cost runs its three workloads and reports a cost for each.

Tiny job counts on the shared test server: nothing here is about the figures, only
that every workload ran to the end and was counted.
"""

from __future__ import annotations

import re
import shutil

import pytest
from bench import lua_costs, redis_cost


def test_every_workload_is_measured(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert redis_cost.main(["--jobs", "40", "--concurrency", "5", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    for label in ("enqueue one", "enqueue_many", "run"):
        row = re.search(rf"^{label} +40 jobs .* ([\d.]+) commands/job +([\d.]+) µs", out, re.M)
        assert row, out
        assert float(row[1]) > 0
    assert "whole job" in out


def test_the_run_pool_takes_keep_none(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Kept no-op jobs are expired by their finish; with --keep-none 0 they are deleted."""
    base = ["--jobs", "40", "--concurrency", "5", "--redis-url", redis_url, "--breakdown"]
    runs = {}
    for keep in ("60", "0"):
        assert redis_cost.main([*base, "--keep-none", keep]) == 0
        out = capsys.readouterr().out
        line = out.split("\nrun ")[1].split("\n")[1]  # the run's breakdown line
        runs[keep] = {entry.split()[0] for entry in line.split("  ") if entry.strip()}
    assert "pexpire" in runs["60"] and "del" not in runs["60"], runs
    assert "pexpire" not in runs["0"] and "del" in runs["0"], runs


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_counts_instructions_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert redis_cost.main(["--jobs", "20", "--concurrency", "5", "--callgrind"]) == 0
    out = capsys.readouterr().out
    counts = re.findall(r" (\d+) instructions/job", out)
    assert len(counts) == 3, out
    assert all(int(n) > 1000 for n in counts), out


@pytest.mark.slow
@pytest.mark.timeout(600)  # valgrind on a shared CPU: a minute and a half is seen
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_lua_costs_prints_a_figure_for_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert lua_costs.main() == 0
    out = capsys.readouterr().out
    steps = dict(re.findall(r"^(\S.*?)\s+([\d,]+)$", out, re.M))
    assert len(steps) == 13, out  # the loop's turn and twelve steps
    cost = {what: int(n.replace(",", "")) for what, n in steps.items()}
    # A command costs more than the Lua around it, and each reply entry costs its share.
    assert cost["redis.call HGET, one reply entry"] > cost["a Lua function call"] > 0, out
    assert cost["HMGET of 13 fields (3 held)"] > cost["HGETALL of 3 pairs (6 entries)"], out
