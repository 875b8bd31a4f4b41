"""bench.redis_cost runs its three workloads and reports a cost for each.

Tiny job counts on the shared test server: nothing here is about the figures, only
that every workload ran to the end and was counted.
"""

from __future__ import annotations

import re
import shutil

import pytest
from bench import redis_cost


def test_every_workload_is_measured(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert redis_cost.main(["--jobs", "40", "--concurrency", "5", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    for label in ("enqueue one", "enqueue_many", "run"):
        row = re.search(rf"^{label} +40 jobs .* ([\d.]+) commands/job +([\d.]+) µs", out, re.M)
        assert row, out
        assert float(row[1]) > 0
    assert "whole job" in out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_counts_instructions_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert redis_cost.main(["--jobs", "20", "--concurrency", "5", "--callgrind"]) == 0
    out = capsys.readouterr().out
    counts = re.findall(r" (\d+) instructions/job", out)
    assert len(counts) == 3, out
    assert all(int(n) > 1000 for n in counts), out
