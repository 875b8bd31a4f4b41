"""Where each setting came from survives an equal copy of the settings, and a sentinel
URL takes the password the README names."""

from __future__ import annotations

import gc
from pathlib import Path

from rota import load_settings
from rota.config import describe
from rota.urls import parse


def test_an_equal_copy_keeps_the_sources_when_the_first_is_gone(tmp_path: Path) -> None:
    """Settings rebuilt equal (a replace that changes nothing) are told as the first were,
    after the first is gone."""
    settings = load_settings(env={"ROTA_LEASE": "60"})
    copy = settings.replace()
    del settings
    gc.collect()
    assert describe(copy) == {"lease": "60.0 (ROTA_LEASE)"}


def test_a_sentinel_url_takes_the_sentinel_password_readme_names() -> None:
    """README.md: a redis+sentinel:// URL, the sentinels' password in
    ROTA_SENTINEL_PASSWORD (no ROTA_SENTINELS: the URL names them)."""
    url = "redis+sentinel://app:pw@s1:26379,s2:26379/mymaster/2"
    settings = load_settings(env={"ROTA_REDIS_URL": url, "ROTA_SENTINEL_PASSWORD": "sent/pw"})
    told = parse(settings.redis_url)
    assert (told.sentinel_password, told.service, told.db) == ("sent/pw", "mymaster", 2)
    assert told.nodes == (("s1", 26379), ("s2", 26379))
    assert "sent/pw" not in describe(settings)["redis_url"]
    # one given in the URL's query is kept when the setting is not set
    kept = load_settings(env={"ROTA_REDIS_URL": f"{url}?sentinel_password=q"})
    assert parse(kept.redis_url).sentinel_password == "q"
