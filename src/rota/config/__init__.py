"""Settings: defaults < TOML file < ``ROTA_*`` environment variables < explicit overrides.

One frozen :class:`Settings` object is built and validated once; a bad value raises
:class:`~rota.errors.ConfigError` whose message names the setting.

Secrets (the Redis password, the web UI's token and Basic credentials) never have to be
written on a command line, where ``ps`` and shell history keep them: each comes from its
setting (``ROTA_REDIS_PASSWORD``...) or from a file named by its ``*_file`` setting, as
container secrets are mounted (:meth:`Settings.secret`). The settings' ``repr`` masks
them, so a log line or traceback that shows the settings does not show them.
"""

from __future__ import annotations

from rota.config.load import from_environment, load_settings
from rota.config.settings import SECRETS, Settings, describe, setting_sources

__all__ = [
    "SECRETS",
    "Settings",
    "describe",
    "from_environment",
    "load_settings",
    "setting_sources",
]
