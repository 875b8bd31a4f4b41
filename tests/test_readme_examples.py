"""The test examples of README.md ("Testing your handlers") pass as a user copies them:
into a project of their own, next to the tour's ``tasks.py``, run by pytest with no
settings of this repository (no ``asyncio_mode``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"

pytestmark = pytest.mark.timeout(300)


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _python_blocks(text: str) -> list[str]:
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.M | re.S)
    return [textwrap.dedent(body) for _, body in blocks]


def test_the_readmes_test_examples_pass_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    (tasks, *_) = _python_blocks(_section(text, "A five-minute tour"))
    assert "def greet" in tasks
    (tmp_path / "tasks.py").write_text(tasks)
    examples = _python_blocks(_section(text, "Testing your handlers"))
    assert len(examples) == 2
    for i, example in enumerate(examples):
        (tmp_path / f"test_example_{i}.py").write_text(example)
    wanted = sum(len(re.findall(r"^async def test_", e, flags=re.M)) for e in examples)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{wanted} passed" in done.stdout, done.stdout
    assert "skipped" not in done.stdout and "warning" not in done.stdout.lower(), done.stdout
