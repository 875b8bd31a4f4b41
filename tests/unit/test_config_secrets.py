"""Secrets in the settings: from a file or a variable, masked when shown; TLS settings
checked before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.config import load_settings
from rota.errors import ConfigError
from rota.redis.access import redis_options


def test_a_secret_comes_from_its_variable_or_its_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    settings = load_settings(env={
        "ROTA_REDIS_PASSWORD_FILE": str(secret), "ROTA_REDIS_USERNAME": "worker",
        "ROTA_WEB_TOKEN": "from-a-variable",
    })  # fmt: skip
    assert settings.secret("redis_password") == "from-a-file"
    assert settings.secret("web_token") == "from-a-variable"
    assert settings.secret("web_auth") is None
    assert redis_options(settings) == {"username": "worker", "password": "from-a-file"}
    shown = repr(settings)
    assert "from-a-variable" not in shown and "web_token='***'" in shown


def test_a_url_password_is_masked_in_the_settings_repr() -> None:
    settings = load_settings(env={"ROTA_REDIS_URL": "redis://u:sekrit@h:1/0"})
    assert "sekrit" not in repr(settings) and "redis://u:***@h:1/0" in repr(settings)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ROTA_REDIS_PASSWORD_FILE": "/nonexistent/pw"}, "redis_password_file: cannot read"),
        ({"ROTA_WEB_TOKEN_FILE": "EMPTY"}, "web_token_file: "),
        ({"ROTA_REDIS_TLS_CA": "CA"}, "redis_tls_ca: set, but redis_url is not a rediss://"),
        (
            {"ROTA_REDIS_URL": "rediss://h:1/0", "ROTA_REDIS_TLS_CA": "/nonexistent/ca"},
            "redis_tls_ca: no such file",
        ),
        (
            {"ROTA_REDIS_URL": "rediss://h:1/0", "ROTA_REDIS_TLS_CERT": "CA"},
            "redis_tls_cert: give the client certificate and its key together",
        ),
    ],
)
def test_bad_secret_and_tls_settings_are_named(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "ca").write_text("not checked here")
    paths = {"EMPTY": str(tmp_path / "empty"), "CA": str(tmp_path / "ca")}
    env = {k: paths.get(v, v) for k, v in env.items()}
    with pytest.raises(ConfigError, match="^" + message.replace(".", r"\.")) as refused:
        load_settings(env=env)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("name", ["web_token", "redis_password", "web_auth", "sentinel_password"])
def test_a_secret_and_its_file_together_are_refused(tmp_path: Path, name: str) -> None:
    """ROTA_WEB_TOKEN silently won over ROTA_WEB_TOKEN_FILE: refuse the pair instead."""
    secret = tmp_path / "secret"
    secret.write_text("from-the-file\n")
    env = {f"ROTA_{name.upper()}": "inline", f"ROTA_{name.upper()}_FILE": str(secret)}
    if name.startswith("sentinel"):
        env.update(ROTA_SENTINELS="s1:26379", ROTA_SENTINEL_SERVICE="mymaster")
    with pytest.raises(ConfigError, match=rf"^{name}: given, and {name}_file too"):
        load_settings(env=env)
