"""Running the ``rota`` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[1]


def rota_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env.update(extra)
    return env


def run_rota(
    *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota", *args],
        capture_output=True,
        text=True,
        input=input,
        env=env or rota_env(),
        cwd=REPO,
        timeout=timeout,
        check=False,
    )


def rota_json(*args: str) -> Any:
    done = run_rota(*args, "--json")
    assert done.returncode == 0, done.stderr
    return msgspec.json.decode(done.stdout)


def start_worker(
    *args: str, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """``rota worker ARGS`` in the background, its output in ``log``."""
    command = [sys.executable, "-m", "rota", "worker", *args]
    if log is None:
        return subprocess.Popen(
            command,
            cwd=REPO,
            env=env or rota_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    with open(log, "wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            command, cwd=REPO, env=env or rota_env(), stdout=out, stderr=subprocess.STDOUT
        )


def log_events(log: Path) -> list[dict[str, Any]]:
    """The JSON events of a worker's or web's log file, skipping lines that are not JSON
    objects (a traceback, a line cut short by a kill)."""
    out = []
    for line in log.read_bytes().splitlines():
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out
