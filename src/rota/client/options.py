"""The client's eight options, written once: what :class:`rota.Client` takes, what
:meth:`Client.from_url` reads from ``ROTA_*`` variables for those not given, and what
:meth:`Client.from_settings` takes from the settings. Each shard's handle is built from
the same struct, so no option is restated per shard.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rota.config import Settings, from_environment
from rota.protocol.job import validate_name

__all__ = ["DEFAULTS", "Options"]

#: The name of each option in :class:`rota.config.Settings` where it differs.
_SETTING = {"durable": "durable_enqueue"}


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """How a client enqueues and over how many shards (see :class:`rota.Client`); the
    defaults are the settings' (:class:`rota.config.Settings`)."""

    namespace: str
    max_args_bytes: int
    unique_ttl: float
    #: Replicas that acknowledge an enqueue (WAIT) within ``durable_timeout`` seconds.
    durable: int
    durable_timeout: float
    #: Seconds an enqueue rides out a Redis that is away or refusing (see enqueue_many).
    ride_through: float
    shards: int
    #: The setting ``ordered`` (see :class:`rota.config.Settings`): a set of names, or
    #: the setting's text.
    ordered: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        names = self.ordered
        if isinstance(names, str):
            names = names.replace(",", " ").split()
        object.__setattr__(self, "ordered", frozenset(validate_name(n) for n in names))

    @classmethod
    def of(cls, settings: Settings) -> Options:
        """The options the settings hold."""
        return cls(**{f: getattr(settings, _SETTING.get(f, f)) for f in _FIELDS})

    @classmethod
    def given(cls, **given: Any) -> Options:
        """The options given (None: not given); one not given is read from its ``ROTA_*``
        variable when it is set (a bad value raises a ConfigError naming it), else its
        default, as the pools read them."""
        unset = [_SETTING.get(f, f) for f, value in given.items() if value is None]
        read = from_environment(unset)
        return DEFAULTS.replace(
            **{f: read[_SETTING.get(f, f)] for f in given if _SETTING.get(f, f) in read},
            **{f: value for f, value in given.items() if value is not None},
        )

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)


_FIELDS = tuple(f.name for f in dataclasses.fields(Options))
#: The options of a client given none: the settings' defaults.
DEFAULTS = Options.of(Settings())
