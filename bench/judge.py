"""What bench.cluster_checks and bench.fair_checks share: the operator's CLI run as a
separate process (as an operator types it), and the checks' figures printed one a line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["rota_cli", "run_checks", "say"]

REPO = Path(__file__).resolve().parents[1]


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rota_cli(url: str, namespace: str, *args: str, timeout: float = 300) -> str:
    """``rota ARGS`` with no ``ROTA_*`` variable of this process: its output (it must
    exit 0)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    out = subprocess.run(
        [sys.executable, "-m", "rota", *args, "--redis-url", url, "--namespace", namespace],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"rota {' '.join(args)}: exit {out.returncode}\n{out.stdout}{out.stderr}"
        )
    return out.stdout


def run_checks(
    parser: argparse.ArgumentParser,
    names: list[str],
    checks: Mapping[str, Callable[[], dict[str, Any]]],
) -> int:
    """Run the checks ``names`` in turn, printing each one's figures."""
    for name in names:
        if name not in checks:
            parser.error(f"unknown check {name!r} (one of {', '.join(checks)})")
    for name in names:
        figures = checks[name]()
        say(f"{name}:")
        for k, v in figures.items():
            say(f"  {k}: {v}")
    return 0
