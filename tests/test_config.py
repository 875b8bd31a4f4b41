"""Settings: defaults < TOML < environment < overrides; bad values name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota import ConfigError, Settings, load_settings


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    assert s == Settings()
    assert (s.namespace, s.concurrency, s.lease, s.grace) == ("rota", 10, 30.0, 30.0)


def test_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "rota.toml"
    cfg.write_text('[rota]\nconcurrency = 20\nnamespace = "fromfile"\ngrace = 5\n')
    s = load_settings(cfg, env={"ROTA_CONCURRENCY": "30", "ROTA_GRACE": "7.5"}, concurrency=40)
    assert (s.namespace, s.grace, s.concurrency) == ("fromfile", 7.5, 40)
    s = load_settings(cfg, env={"ROTA_CONCURRENCY": "30"})
    assert s.concurrency == 30
    s = load_settings(cfg, env={}, concurrency=None)
    assert s.concurrency == 20


def test_shipped_example_config_is_the_defaults() -> None:
    example = Path(__file__).parent.parent / "config" / "rota.toml"
    assert load_settings(example, env={}) == Settings()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"concurrency": "many"}, "concurrency"),
        ({"concurency": 3}, "concurency: unknown setting"),
        ({"lease": -1}, "lease"),
        ({"prefetch": -1}, "prefetch"),
        ({"namespace": "a{b}"}, "namespace"),
        ({"log_format": "xml"}, "log_format"),
        ({"lease": 2, "heartbeat_interval": 5}, "lease: must be longer"),
    ],
)
def test_bad_values_name_the_setting(source: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env={}, **source)


def test_bad_environment_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        load_settings(env={"ROTA_CONCURRENCY": "lots"})
    bad = tmp_path / "bad.toml"
    bad.write_text("concurrency = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.toml", env={})
    typo = tmp_path / "typo.toml"
    typo.write_text("[rota]\nconcurrencyy = 3\n")
    with pytest.raises(ConfigError, match="concurrencyy: unknown setting"):
        load_settings(typo, env={})
