"""``python -m bench.chart results.json results.png``: the results as one figure.

Runs in bench/.venv-peers, where matplotlib is installed (never a project dependency).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.report import MAIN, aggregate, stat

COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def _bars(
    ax: Any,
    ok: Any,
    systems: list[str],
    groups: list[tuple[str, str, str]],
    ylabel: str,
    title: str,
    log: bool = False,
) -> None:
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for g, (workload, metric, _) in enumerate(groups):
            s = stat(ok, workload, system, metric)
            if s is None:
                continue
            xs.append(g + (i - (len(systems) - 1) / 2) * width)
            ys.append(s.median)
            lo.append(s.median - s.lo)
            hi.append(s.hi - s.median)
        if xs:
            ax.bar(
                xs, ys, width, yerr=[lo, hi], capsize=2, label=system,
                color=COLORS[MAIN.index(system) % len(COLORS)],
            )  # fmt: skip
    ax.set_xticks(range(len(groups)), [label for _, _, label in groups])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def draw(data: dict[str, Any], out: Path) -> None:
    ok, _ = aggregate(data)
    present = {r["system"] for r in data["results"]}
    systems = [s for s in MAIN if s in present]
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    _bars(
        axes[0][0], ok, systems,
        [("noop c=10", "rate", "noop c=10"), ("noop c=100", "rate", "noop c=100")],
        "jobs/s", "Throughput, one worker process (higher is better)",
    )  # fmt: skip
    _bars(
        axes[0][1], ok, systems,
        [
            ("enqueue one", "rate", "one at a time"),
            ("enqueue 64", "rate", "64 in flight"),
            ("enqueue batch", "rate", "batch API"),
        ],
        "jobs/s (log)", "Enqueue (higher is better)", log=True,
    )  # fmt: skip
    _bars(
        axes[1][0], ok, systems,
        [("latency", "p50_ms", "p50"), ("latency", "p99_ms", "p99")],
        "ms (log)", "Enqueue-to-start latency, idle worker (lower is better)", log=True,
    )  # fmt: skip
    _bars(
        axes[1][1], ok, systems,
        [
            ("enqueue one", "redis_cpu_us", "Redis CPU, enqueue"),
            ("noop c=100", "redis_cpu_us", "Redis CPU, run"),
            ("noop c=100", "worker_cpu_us", "worker CPU"),
        ],
        "µs per job (log)", "CPU per job (lower is better)", log=True,
    )  # fmt: skip
    axes[0][0].legend(fontsize=8)
    reps = data["config"]["reps"]
    fig.suptitle(
        f"rota and peers on one Redis, {data['machine']['cpus']} CPUs; median of {reps}"
        + (", bars min–max" if reps > 1 else ""),
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    draw(json.loads(src.read_text()), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
