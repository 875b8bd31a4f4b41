"""Settings: defaults < TOML file < ``ROTA_*`` environment variables < explicit overrides.

One frozen :class:`Settings` object is built and validated once; a bad value raises
:class:`~rota.errors.ConfigError` whose message names the setting.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from rota.connection import check_url
from rota.errors import ConfigError
from rota.protocol.keys import validate_namespace

__all__ = ["Settings", "load_settings"]

ENV_PREFIX = "ROTA_"
DEFAULT_CONFIG = Path("config/rota.toml")


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every knob of rota, with its default. Durations are in seconds."""

    redis_url: str = "redis://localhost:6379/0"
    namespace: str = "rota"
    concurrency: int = 10
    lease: float = 30.0
    heartbeat_interval: float = 5.0
    grace: float = 30.0
    max_lost: int = 3
    max_args_bytes: int = 512 * 1024
    keep_result: float = 3600.0
    keep_none: float = 60.0
    complete_max_count: int = 100_000
    unique_ttl: float = 86400.0
    wake_timeout: float = 5.0
    scheduler_interval: float = 10.0
    fetch_batch: int = 100
    prefetch: int = 100
    dead_max_count: int = 10_000
    dead_max_age: float = 180 * 86400.0
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    def __post_init__(self) -> None:
        check_url(self.redis_url)  # redis://, rediss:// or unix://, else a ConfigError
        try:
            validate_namespace(self.namespace)
        except ValueError as exc:
            raise ConfigError(f"namespace: {exc}") from None
        positive = (
            "concurrency",
            "lease",
            "heartbeat_interval",
            "wake_timeout",
            "scheduler_interval",
            "fetch_batch",
            "max_args_bytes",
            "dead_max_count",
            "complete_max_count",
            "max_lost",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: must be greater than 0, got {getattr(self, name)!r}")
        for name in ("grace", "keep_result", "keep_none", "unique_ttl", "dead_max_age", "prefetch"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must not be negative, got {getattr(self, name)!r}")
        if self.lease <= self.heartbeat_interval:
            raise ConfigError(
                f"lease: must be longer than heartbeat_interval ({self.heartbeat_interval}),"
                f" got {self.lease}"
            )

    def replace(self, **changes: Any) -> Settings:
        return _build({**msgspec.structs.asdict(self), **changes}, source="override")


_FIELDS = {f.name: f for f in msgspec.structs.fields(Settings)}


def _build(values: Mapping[str, Any], *, source: str, strict: bool = True) -> Settings:
    for key in values:
        if key not in _FIELDS:
            raise ConfigError(f"{key}: unknown setting (from {source})")
    try:
        return msgspec.convert(dict(values), Settings, strict=strict)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):  # from __post_init__: names the setting
            raise ConfigError(f"{exc.__cause__} (from {source})") from None
        # msgspec says "Expected `int`, got `str` - at `$.concurrency`"
        text = str(exc)
        where = text.rsplit("$.", 1)[-1] if "$." in text else "settings"
        raise ConfigError(f"{where}: {text.split(' - at ')[0]} (from {source})") from None


def load_settings(
    config_file: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    base: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Settings:
    """Build the settings from every source, highest last: the defaults, ``base`` (what
    the application's code chose), the config file, ``ROTA_*`` variables, ``overrides``.

    ``config_file`` None means ``config/rota.toml`` when it exists. Overrides whose value
    is None are ignored, so command-line flags that were not given can be passed as is.
    """
    values: dict[str, Any] = {k: v for k, v in (base or {}).items() if v is not None}
    path = Path(config_file) if config_file is not None else DEFAULT_CONFIG
    if config_file is not None or path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None
        section = data.get("rota", data)
        if section is not data and len(data) > 1:
            extra = sorted(k for k in data if k != "rota")
            raise ConfigError(f"{extra[0]}: unknown setting outside [rota] (from {path})")
        _build({**values, **section}, source=str(path))
        values.update(section)
    environ = os.environ if env is None else env
    from_env = {
        k[len(ENV_PREFIX) :].lower(): v for k, v in environ.items() if k.startswith(ENV_PREFIX)
    }
    for key in from_env:
        if key not in _FIELDS:
            raise ConfigError(f"{ENV_PREFIX}{key.upper()}: unknown setting (from environment)")
    if from_env:
        _build({**values, **from_env}, source="environment", strict=False)
        values.update(from_env)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return _build(values, source="settings", strict=False)
