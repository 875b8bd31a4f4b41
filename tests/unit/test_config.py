"""Settings from defaults, a file and the environment: precedence, and bad values named
with where they came from."""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Any

import pytest

from rota import Client, ConfigError, Settings, load_settings
from rota.config import describe
from rota.config.settings import FIELDS


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


def test_shipped_example_config_is_the_defaults(tmp_path: Path) -> None:
    """The list of every setting is package data (README.md points at it): read
    through importlib.resources, as from an installed wheel, it is the defaults."""
    shipped = importlib.resources.files("rota") / "rota.toml"
    example = tmp_path / "rota.toml"
    example.write_text(shipped.read_text(encoding="utf-8"))
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
        ({"redis_url": "http://localhost:6379"}, "redis_url: unknown scheme http://"),
        ({"redis_url": ""}, "redis_url: empty"),
    ],
)
def test_bad_values_name_the_setting(source: dict[str, Any], message: str) -> None:
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


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://x", "unknown scheme http://"),
        ("redis+foo://x", "unknown scheme redis+foo://"),
        ("garbage", "not a URL"),
        ("localhost:6379", "not a URL"),
        ("redis://[::1", "not a URL"),
        ("redis://h:abc/0", "Port could not be cast"),
        ("redis://h?socket_timeout=soon", "socket_timeout"),
        ("redis://h/zero", "the database after the host must be a number"),
        ("unix://", "the socket's path"),
    ],
)
def test_a_redis_url_rota_cannot_use(url: str, message: str) -> None:
    """Refused when the settings are built, wherever the URL comes from, and by
    Client.from_url: a ConfigError naming redis_url (and the schemes rota understands)."""
    for attempt in (
        lambda: Settings(redis_url=url),
        lambda: load_settings(env={}, redis_url=url),
        lambda: load_settings(env={"ROTA_REDIS_URL": url}),
        lambda: Client.from_url(url),
    ):
        with pytest.raises(ConfigError, match=r"^redis_url: ") as refused:
            attempt()
        assert message in str(refused.value)
        if message.startswith(("unknown scheme", "not a URL")):
            assert "redis://, rediss:// and unix://" in str(refused.value)
    with pytest.raises(
        ConfigError, match=r"redis_url: .*\(from environment variable ROTA_REDIS_URL\)"
    ):
        load_settings(env={"ROTA_REDIS_URL": url})


def test_redis_urls_rota_can_use(tmp_path: Path) -> None:
    for url in (
        "redis://localhost:6379/0",
        "redis://localhost",
        "REDIS://127.0.0.1:6380/",
        "rediss://user:pass@[::1]:6380/2?socket_timeout=3",
        f"unix://{tmp_path}/redis.sock?db=1",
        f"unix:{tmp_path}/redis.sock",
    ):
        assert load_settings(env={}, redis_url=url).redis_url == url


def test_url_errors_do_not_show_the_password() -> None:
    with pytest.raises(ConfigError, match=r"redis://ann:\*\*\*@h:abc/0") as refused:
        load_settings(env={}, redis_url="redis://ann:s3cret@h:abc/0")
    assert "s3cret" not in str(refused.value)
    assert "redis://ann:***@h:abc/0" in str(refused.value)


@pytest.mark.parametrize("level", ["WARNING", "Warning", "warning"])
def test_log_words_are_read_in_any_case(level: str, tmp_path: Path) -> None:
    file = tmp_path / "rota.toml"
    file.write_text('log_format = "JSON"\n')
    settings = load_settings(file, env={"ROTA_LOG_LEVEL": level})
    assert (settings.log_level, settings.log_format) == ("warning", "json")
    assert load_settings(file, env={}, log_level=level).log_level == "warning"
    with pytest.raises(ConfigError, match="log_level"):
        load_settings(file, env={"ROTA_LOG_LEVEL": "LOUD"})


def test_describe_says_where_each_setting_came_from(tmp_path: Path) -> None:
    file = tmp_path / "rota.toml"
    file.write_text("concurrency = 7\nlease = 60\n")
    settings = load_settings(
        file,
        env={"ROTA_LEASE": "90", "ROTA_REDIS_PASSWORD": "s3cret"},
        base={"namespace": "shop", "concurrency": 50},
        grace=5,
        redis_url="redis://u:pw@example.com:6379/0",
    )
    told = describe(settings)
    assert told == {
        "redis_url": "redis://u:***@example.com:6379/0 (flag)",
        "namespace": "shop (code)",
        "concurrency": f"7 ({file})",  # the file beats the code
        "lease": "90.0 (ROTA_LEASE)",
        "grace": "5.0 (flag)",
        "redis_password": "*** (ROTA_REDIS_PASSWORD)",
    }
    assert "s3cret" not in str(told) and ":pw@" not in str(told)
    changed = settings.replace(grace=1.0)
    assert describe(changed)["grace"] == "1.0 (override)"
    assert describe(changed)["lease"] == "90.0 (ROTA_LEASE)"
    assert describe(Settings(concurrency=3)) == {"concurrency": "3 (code)"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"ROTA_CONCURRENCY": "abc"},
            "concurrency: expected a whole number, got 'abc'"
            " (from environment variable ROTA_CONCURRENCY)",
        ),
        ({"ROTA_LEASE": "soon"}, "lease: expected a number, got 'soon' (from environment"),
        (
            {"ROTA_LOG_LEVEL": "loud"},
            "log_level: 'loud' is not one of debug, info, warning, error"
            " (from environment variable ROTA_LOG_LEVEL)",
        ),
    ],
)
def test_a_bad_value_names_its_setting_and_where_it_came_from(
    env: dict[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)) as caught:
        load_settings(None, env=env)
    assert str(caught.value).startswith(message)
    assert "`" not in str(caught.value)


FLOATS = [name for name, f in FIELDS.items() if f.type is float]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity"])
@pytest.mark.parametrize("name", FLOATS)
def test_no_float_setting_takes_nan_or_infinity_from_the_environment(name: str, value: str) -> None:
    """NaN passes every comparison and infinity is no time: ROTA_KEEP_RESULT=nan buried
    every finished job, ROTA_LEASE=nan killed the worker. Each is refused at once."""
    env = {f"ROTA_{name.upper()}": value}
    with pytest.raises(ConfigError, match=rf"^{name}: must be a finite number") as refused:
        load_settings(env=env)
    message = str(refused.value)
    assert message.startswith(f"{name}: must be a finite number"), message
    assert f"(from environment variable ROTA_{name.upper()})" in message


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"ROTA_HEARTBEAT_INTERVAL": "40"},
            "heartbeat_interval: must be shorter than lease (30.0, the default), got 40"
            " (from environment variable ROTA_HEARTBEAT_INTERVAL)",
        ),
        (
            {"ROTA_SENTINEL_PASSWORD": "x"},
            "sentinel_password: set, but redis_url is not a redis+sentinel:// URL and"
            " sentinels is not set: give one (redis_url, ROTA_REDIS_URL; or sentinels as"
            " host:port,host:port, ROTA_SENTINELS)"
            " (from environment variable ROTA_SENTINEL_PASSWORD)",
        ),
    ],
)
def test_an_error_blames_the_setting_the_user_gave(env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(line)}$") as refused:
        load_settings(env=env)
    assert str(refused.value) == line


def test_a_file_is_not_blamed_for_a_value_it_does_not_hold(tmp_path: Path) -> None:
    toml = tmp_path / "rota.toml"
    toml.write_text("[rota]\nconcurrency = 5\n")
    with pytest.raises(ConfigError, match=r"grace: must be from 0 to 86400, got -1\.0 \(from code"):
        load_settings(toml, base={"grace": -1.0})
