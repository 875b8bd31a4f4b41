"""Settings: defaults < TOML < environment < overrides; bad values name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota import ConfigError, Settings, load_settings
from tests.cli_helpers import rota_env, run_rota


def test_nan_is_refused_from_a_file_from_code_and_by_the_cli(tmp_path: Path) -> None:
    toml = tmp_path / "rota.toml"
    toml.write_text("[rota]\nlease = nan\n")
    with pytest.raises(
        ConfigError, match=rf"lease: must be a finite number, got nan \(from {toml}\)"
    ):
        load_settings(toml)
    with pytest.raises(ConfigError, match="keep_result: must be a finite number"):
        Settings(keep_result=float("inf"))
    done = run_rota("status", env=rota_env(ROTA_KEEP_RESULT="nan"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "rota: keep_result: must be a finite number, got nan"
        " (from environment variable ROTA_KEEP_RESULT)"
    ]
