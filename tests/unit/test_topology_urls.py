"""Sentinel and Cluster URLs and settings: parsed, refused with the setting named, and
folded into ``redis_url``; the sentinel password never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota import Settings, load_settings
from rota.errors import ConfigError
from rota.urls import CLUSTER, SENTINEL, check_url, parse, redacted


def test_a_sentinel_url_names_sentinels_service_database_and_user() -> None:
    t = parse("redis+sentinel://app:s%40cret@10.0.0.1:26379,[::1]:26380/mymaster/2")
    assert t.kind == SENTINEL
    assert t.nodes == (("10.0.0.1", 26379), ("::1", 26380))
    assert (t.service, t.db, t.username, t.password) == ("mymaster", 2, "app", "s@cret")


def test_a_cluster_url_names_seed_nodes() -> None:
    t = parse("redis+cluster://h1:7000,h2:7001")
    assert t.kind == CLUSTER
    assert t.nodes == (("h1", 7000), ("h2", 7001))


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis+sentinel://h:26379", "service name"),
        ("redis+sentinel://h:26379/m/x", "service name"),
        ("redis+sentinel://h/m", "host:port"),
        ("redis+cluster://h:7000/0", "one database"),
        ("redis+cluster://h:x", "host:port"),
    ],
)
def test_a_bad_topology_url_is_refused_naming_redis_url(url: str, words: str) -> None:
    with pytest.raises(ConfigError, match=r"^redis_url: ") as refused:
        check_url(url)
    assert words in str(refused.value)


def test_sentinel_settings_become_a_sentinel_url() -> None:
    s = load_settings(
        env={
            "ROTA_REDIS_URL": "redis://app:pw@localhost:6379/3",
            "ROTA_SENTINELS": "s1:26379, s2:26379",
            "ROTA_SENTINEL_SERVICE": "mymaster",
            "ROTA_SENTINEL_PASSWORD": "sent/pw",
        }
    )
    assert s.redis_url == (
        "redis+sentinel://app:pw@s1:26379,s2:26379/mymaster/3?sentinel_password=sent%2Fpw"
    )
    assert parse(s.redis_url).sentinel_password == "sent/pw"
    assert redacted(s.redis_url) == (
        "redis+sentinel://app:***@s1:26379,s2:26379/mymaster/3?sentinel_password=***"
    )
    assert s.replace(concurrency=3).redis_url == s.redis_url  # building again changes nothing


def test_sentinel_settings_without_a_service_name_the_setting() -> None:
    with pytest.raises(ConfigError, match="sentinel_service"):
        Settings(sentinels="s1:26379")
    with pytest.raises(ConfigError, match="sentinels"):
        Settings(sentinel_service="mymaster")


def test_durable_enqueue_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="durable_enqueue"):
        Settings(durable_enqueue=-1)
    assert Settings(durable_enqueue=1).durable_enqueue == 1


def test_the_sentinel_password_comes_from_a_file_and_is_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "sentinel-password"
    secret.write_text("from-a-file\n")
    s = Settings(
        sentinels="s1:26379", sentinel_service="mymaster", sentinel_password_file=str(secret)
    )
    assert parse(s.redis_url).sentinel_password == "from-a-file"
    assert "from-a-file" not in repr(s)
    shown = Settings(sentinels="s1:26379", sentinel_service="m", sentinel_password="pw")
    assert "'pw'" not in repr(shown) and "sentinel_password=pw" not in repr(shown)
