"""``rota web`` and the UI of ``rota demo`` in subprocesses, and what rota.web imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rota.config import SECRETS
from tests.cli_helpers import REPO, log_events, rota_env, run_rota
from tests.redis_server import free_port


def test_importing_the_web_package_loads_no_worker_code() -> None:
    code = (
        "import sys, rota.web, rota.web.server, rota.cli.web; "
        "bad = sorted(m for m in sys.modules if m.startswith(('rota.worker', 'rota.daemon'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[]"


def test_web_is_a_command() -> None:
    done = run_rota("--help")
    assert "web" in done.stdout
    done = run_rota("web", "--help")
    assert done.returncode == 0
    for option in ("--bind", "--auth", "--token", "--redis-url", "--namespace", "--config"):
        assert option in done.stdout


def test_the_help_names_every_credential_and_where_it_comes_from() -> None:
    """Each web secret of the settings (the token, Basic, read-only, metrics) is named
    in ``rota web --help`` by its variable and its file setting."""
    help_text = run_rota("web", "--help").stdout
    names = [name for name in SECRETS if name.startswith("web_")]
    assert {"web_readonly_token", "web_metrics_token"} <= set(names)
    for name in names:
        assert f"ROTA_{name.upper()}" in help_text, name
        assert f"{name}_file" in help_text, name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--bind", "nowhere"), "--bind"),
        (("--bind", "127.0.0.1:99999"), "--bind"),
        (("--bind", "127.0.0.1:"), "--bind"),
        (("--bind", "::1:5040"), "--bind"),
        (("--auth", "nocolon"), "--auth"),
        (("--auth", ":password"), "--auth"),
        (("--token", " "), "--token"),
        (("--namespace", "bad{name}"), "namespace"),
    ],
)
def test_bad_values_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    done = run_rota("web", *args, "--redis-url", "redis://127.0.0.1:1/0")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_a_url_that_is_not_redis_exits_2() -> None:
    done = run_rota("web", "--redis-url", "bogus://x", "--bind", f"127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert done.stderr.startswith("rota: --redis-url: ") and len(done.stderr.splitlines()) == 1


def _wait_for_event(proc: subprocess.Popen[bytes], log: Path, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for event in log_events(log):
            if event.get("event") == name:
                return event
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.1)
    raise AssertionError(f"no {name!r} event: {log.read_text()[-3000:]}")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rota", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def test_rota_web_serves_until_sigint(tmp_path: Path, redis_url: str, namespace: str) -> None:
    port = free_port()
    log = tmp_path / "web.log"
    args = ["web", "--bind", f"127.0.0.1:{port}", "--redis-url", redis_url]
    proc = _start([*args, "--namespace", namespace, "--auth", "ada:pw"], log, rota_env())
    try:
        started = _wait_for_event(proc, log, "web started")
        assert started["url"] == f"http://127.0.0.1:{port}"
        assert started["auth"] == "on"
        base = started["url"]
        assert httpx.get(base + "/healthz").status_code == 200
        assert httpx.get(base + "/api/queues").status_code == 401
        answer = httpx.get(base + "/api/queues", auth=("ada", "pw"))
        assert (answer.status_code, answer.json()) == (
            200,
            {"queues": [], "total": 0, "offset": 0, "limit": 100, "order": "busy"},
        )
        rebound = httpx.get(base + "/healthz", headers={"host": "rebind.example"})
        assert rebound.status_code == 400
        taken = run_rota(*args)
        assert taken.returncode == 2 and "cannot listen" in taken.stderr
    finally:
        code = _stop(proc)
    assert code == 0, log.read_text()[-3000:]
    assert any(e.get("event") == "web stopped" for e in log_events(log))


def test_demo_serves_the_ui(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    proc = _start(["demo", "--rate", "20"], log, rota_env(ROTA_LOG_FORMAT="json"))
    try:
        url = _wait_for_event(proc, log, "web UI")["url"]
        assert url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 30
        names: set[str] = set()
        while time.monotonic() < deadline and "send_email" not in names:
            queues = httpx.get(url + "/api/queues").json()["queues"]
            names = {q["name"] for q in queues}
            time.sleep(0.2)
        assert "send_email" in names
        page = httpx.get(url + "/", headers={"accept": "text/html"})
        assert page.status_code == 200 and "Dashboard" in page.text
    finally:
        code = _stop(proc)
    assert code == 0, log.read_text()[-3000:]
    assert any(e.get("event") == "demo stopped" for e in log_events(log))
