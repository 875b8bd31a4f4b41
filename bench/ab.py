"""A before/after that cannot lie: one build of rota against the work tree, in one run.

``make bench-ab BASE=<git ref>`` (``python -m bench.ab --base REF``) installs the
commit REF into a virtual environment of its own (``bench/.venv-ab/<commit>``, kept for
the next run), then runs each workload of :mod:`bench.ab_driver` with BASE's Python and
with the work tree's, alternately (BASE, tree, BASE, tree...), each run in a fresh
process against a fresh private redis-server. On this kind of host a figure moves by up
to 2x from one day to the next; measured alternately within minutes, the two builds see
the same host, and the spread of the repetitions says how far a ratio can be trusted.

The figures: no-op jobs per second at concurrency 10 and 100 and the worker's CPU per
job; enqueue-to-start latency on an idle pool (p50, p99); enqueue one at a time and in
batches of 1,000; and two counts that do not move with the host at all, Python calls in
the pool's process per no-op job and commands Redis runs per job (see ``cost`` in
:mod:`bench.ab_driver`), so that a 5 % change shows in one run. The same for jobs that
raise (every job fails while a service they call is down), and how a failing job
compares with a no-op one within each build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("ab_driver.py")
VENVS = Path(__file__).with_name(".venv-ab")

#: (workload, figure, unit, better) in the order printed; better: "up" or "down".
FIGURES = [
    ("noop10", "jobs_per_s", "noop c=10, jobs/s", "up"),
    ("noop100", "jobs_per_s", "noop c=100, jobs/s", "up"),
    ("noop100", "cpu_us_per_job", "worker CPU per job, c=100, µs", "down"),
    ("latency", "latency_p50_ms", "enqueue→start p50, ms", "down"),
    ("latency", "latency_p99_ms", "enqueue→start p99, ms", "down"),
    ("enqueue_one", "enqueue_one_per_s", "enqueue one at a time, jobs/s", "up"),
    ("batch", "enqueue_batch_per_s", "enqueue_many by 1,000, jobs/s", "up"),
    ("cost", "python_calls_per_job", "Python calls per no-op job (counted)", "down"),
    ("cost", "redis_commands_per_job", "Redis commands per no-op job (counted)", "down"),
    ("fail100", "jobs_per_s", "failing c=100, jobs/s", "up"),
    ("fail100", "cpu_us_per_job", "worker CPU per failing job, c=100, µs", "down"),
    ("cost_fail", "python_calls_per_job", "Python calls per failing job (counted)", "down"),
    ("cost_fail", "redis_commands_per_job", "Redis commands per failing job (counted)", "down"),
]

#: Figures of one build over another of the same build, each build on its own:
#: (label, numerator, denominator), medians.
WITHIN = [
    ("failing / no-op, worker CPU per job", "fail100.cpu_us_per_job", "noop100.cpu_us_per_job"),
    (
        "failing / no-op, Python calls per job",
        "cost_fail.python_calls_per_job",
        "cost.python_calls_per_job",
    ),
]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def build(ref: str) -> tuple[str, Path]:
    """The commit of ``ref`` and the Python of a virtual environment with it installed
    (made once per commit)."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    venv = VENVS / commit[:12]
    python = venv / "bin" / "python"
    if (venv / ".built").exists():
        return commit, python
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "src"
        tree.mkdir()
        archive = subprocess.run(
            ["git", "archive", commit], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(tree), "uvloop"], check=True)
    (venv / ".built").touch()
    return commit, python


def build_tree() -> Path:
    """The Python of a virtual environment with the work tree installed as BASE is (a
    wheel, rota's own dependencies only): the project's ``.venv`` holds the dev extras
    (OpenTelemetry among them, which makes every enqueue ask for a tracer provider), so
    running the tree from it would charge the tree for what BASE never loads."""
    venv = VENVS / "work"
    python = venv / "bin" / "python"
    if not (venv / ".built").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT), "uvloop"], check=True)
        (venv / ".built").touch()
    else:  # the tree as it is now; its dependencies are there already
        again = ["install", "-q", "--no-deps", "--force-reinstall", str(ROOT)]
        subprocess.run([str(python), "-m", "pip", *again], check=True)
    return python


def run_once(python: Path, workload: str, jobs: int) -> dict[str, float]:
    """One workload in a fresh process, against a fresh private redis-server."""
    with RedisServer() as server:
        done = subprocess.run(
            [str(python), str(DRIVER), workload, server.url, str(jobs)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tempfile.gettempdir(),  # import rota from the build, never from the tree
        )
    if done.returncode != 0:
        raise RuntimeError(f"{workload} failed under {python}:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def measure(pythons: dict[str, Path], reps: int, jobs: int) -> dict[str, dict[str, list[float]]]:
    """Every figure of every build, each workload run ``reps`` times per build,
    alternating builds."""
    out: dict[str, dict[str, list[float]]] = {name: {} for name in pythons}
    for workload in dict.fromkeys(w for w, *_ in FIGURES):
        for _ in range(reps):
            for name, python in pythons.items():
                for key, value in run_once(python, workload, jobs).items():
                    out[name].setdefault(f"{workload}.{key}", []).append(value)
                print(".", end="", file=sys.stderr, flush=True)  # noqa: T201
    print(file=sys.stderr)  # noqa: T201
    return out


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    fmt = "{:,.0f}" if hi >= 100 else "{:.2f}"
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def table(
    base: str, results: dict[str, dict[str, list[float]]]
) -> tuple[str, list[dict[str, Any]]]:
    """The Markdown table, and its rows as data."""
    lines = [
        f"| figure | BASE {base[:10]} | work tree | ratio (tree / BASE, medians) | spread |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for workload, figure, label, better in FIGURES:
        key = f"{workload}.{figure}"
        a, b = results["base"].get(key, []), results["tree"].get(key, [])
        if not a or not b:
            continue
        ratio = statistics.median(b) / statistics.median(a)
        # how far apart the repetitions of one build are, relative to its median
        spread = max(
            (max(v) - min(v)) / statistics.median(v) if statistics.median(v) else 0.0
            for v in (a, b)
        )
        verdict = "better" if (ratio > 1) == (better == "up") and abs(ratio - 1) > spread else ""
        lines.append(
            f"| {label} | {_span(a)} | {_span(b)} | {ratio:.3f} {verdict} | ±{spread:.0%} |"
        )
        rows.append({"figure": key, "label": label, "base": a, "tree": b, "ratio": ratio,
                     "spread": spread, "better": better})  # fmt: skip
    for label, top, bottom in WITHIN:
        within = []
        for build in ("base", "tree"):
            a, b = results[build].get(top, []), results[build].get(bottom, [])
            if a and b:
                within.append(statistics.median(a) / statistics.median(b))
        if len(within) == 2:
            base_x, tree_x = within
            lines.append(f"| {label} | {base_x:.2f}x | {tree_x:.2f}x | {tree_x / base_x:.3f} | |")
    return "\n".join(lines), rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the git ref to compare against")
    parser.add_argument("--reps", type=int, default=3, help="runs of each workload per build")
    parser.add_argument("--jobs", type=int, default=40_000, help="jobs per no-op run")
    parser.add_argument("--quick", action="store_true", help="small counts, one repetition")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ab.json")
    args = parser.parse_args(argv)
    reps, jobs = (1, 2000) if args.quick else (max(1, args.reps), max(100, args.jobs))
    commit, base_python = build(args.base)
    print(f"BASE {args.base} = {commit[:12]} ({base_python})", file=sys.stderr)  # noqa: T201
    results = measure({"base": base_python, "tree": build_tree()}, reps, jobs)
    text, rows = table(commit, results)
    print(text)  # noqa: T201
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"base": commit, "reps": reps, "jobs": jobs, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
