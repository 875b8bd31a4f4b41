"""``make demo`` on a machine with no Redis URL: jobs flow, Ctrl-C cleans everything up."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import msgspec
import pytest

from rota import Client
from rota.examples.demo import banner, remind
from tests.cli_helpers import REPO, rota_env

# Slow (the demo: a daemon, a web server and Redis, 40 s): `make test` runs it, not check.
pytestmark = pytest.mark.slow


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_make_demo_runs_jobs_and_ctrl_c_leaves_nothing_behind(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    env = rota_env()  # no ROTA_REDIS_URL: the demo starts its own Redis
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["make", "-s", "demo"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        socket_path = None
        completed = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (socket_path is None or completed < 10):
            time.sleep(0.2)
            completed, socket_path = 0, None
            for line in log.read_bytes().splitlines():
                try:
                    event = msgspec.json.decode(line)
                except msgspec.DecodeError:
                    continue
                if event.get("event") == "demo started":
                    socket_path = event["redis_url"].removeprefix("unix://")
                if event.get("event") == "job" and event.get("outcome") == "complete":
                    completed += 1
        assert socket_path, log.read_text()[-3000:]
        text = log.read_text()
        assert "| rota demo is running" in text and "| stop     Ctrl-C" in text, text[-3000:]
        assert "| web UI   http://127.0.0.1:" in text
        assert completed >= 10, log.read_text()[-3000:]
        assert Path(socket_path).exists()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 10
    while _processes_mentioning(socket_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(socket_path)
    assert not Path(socket_path).exists()
    assert not Path(socket_path).parent.exists()
    assert "demo stopped" in log.read_text()


async def test_the_demo_reminds_where_its_web_ui_is(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job lines scroll the banner away: a line every few seconds says it again."""
    assert "http://127.0.0.1:5040" in banner("http://127.0.0.1:5040")
    with anyio.move_on_after(0.35):
        await remind(client, "http://127.0.0.1:5040", 0.1)
    lines = [line for line in capsys.readouterr().out.splitlines() if "demo running" in line]
    assert len(lines) >= 2, lines
    assert all("http://127.0.0.1:5040" in line and "processed" in line for line in lines)
