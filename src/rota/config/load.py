"""The settings read from their sources, highest last: the defaults, the application's
code, the TOML file, ``ROTA_*`` environment variables, explicit overrides (see
:mod:`rota.config`)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from rota.config.settings import ENV_PREFIX, FIELDS, Settings, build, remember
from rota.errors import ConfigError

__all__ = ["DEFAULT_CONFIG", "from_environment", "load_settings"]

#: ROTA_* variables that are no setting: the CLI reads them itself (`rota --local-time`).
_NOT_SETTINGS: Final = frozenset({"ROTA_LOCAL_TIME"})
DEFAULT_CONFIG = Path("config/rota.toml")


def from_environment(names: Iterable[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings ``names`` that ``ROTA_*`` variables set, checked as
    :func:`load_settings` checks them (a bad value: a ConfigError naming the variable):
    what :meth:`rota.Client.from_url` reads for the arguments it is not given."""
    environ = os.environ if env is None else env
    variables = {name: f"{ENV_PREFIX}{name.upper()}" for name in names}
    given = {name: environ[var] for name, var in variables.items() if var in environ}
    if not given:
        return {}
    sources = {name: variables[name] for name in given}
    built = build(given, source="environment", strict=False, sources=sources)
    return {name: getattr(built, name) for name in given}


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
    sources = dict.fromkeys(values, "code")
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
        build(
            {**values, **section},
            source=str(path),
            sources={**sources, **dict.fromkeys(section, str(path))},
        )
        values.update(section)
        sources.update(dict.fromkeys(section, str(path)))
    environ = os.environ if env is None else env
    from_env = {
        k[len(ENV_PREFIX) :].lower(): v
        for k, v in environ.items()
        if k.startswith(ENV_PREFIX) and k not in _NOT_SETTINGS
    }
    for key in from_env:
        if key not in FIELDS:
            raise ConfigError(f"{ENV_PREFIX}{key.upper()}: unknown setting (from environment)")
    if from_env:
        env_sources = {k: f"{ENV_PREFIX}{k.upper()}" for k in from_env}
        build(
            {**values, **from_env},
            source="environment",
            strict=False,
            sources={**sources, **env_sources},
        )
        values.update(from_env)
        sources.update(env_sources)
    given = {k: v for k, v in overrides.items() if v is not None}
    values.update(given)
    sources.update(dict.fromkeys(given, "flag"))
    settings = build(values, source="settings", strict=False, sources=sources)
    remember(settings, sources)
    return settings
