"""The range of every number a user hands rota, in one table: the settings, a handler's
options, a job's options and the delays of a retry.

Each entry point checks what enters it against these ranges and refuses anything
outside with one line naming the value and where it came from; nothing out of range
reaches Redis. The bounds are finite on both sides on purpose: NaN, infinity and 1e300
are no time, size or count, and a value beyond what anyone means (a delay in
milliseconds, a concurrency of a hundred million) is a mistake to say at once, not
a pool that runs out of memory an hour later or a retry score that no reader parses.

docs/operations.md and README.md show the same table; ``rota/rota.toml`` (shipped) the
settings' ranges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, TypeVar

from rota.protocol.shards import MAX_SHARDS

__all__ = [
    "DAY",
    "FAIR",
    "HANDLER",
    "HOUR",
    "JOB",
    "MAX_DELAY",
    "SETTINGS",
    "TEN_YEARS",
    "Bound",
    "check",
    "checked",
    "first_wrong",
]

T = TypeVar("T")

DAY: Final = 86400.0
HOUR: Final = 3600.0
#: Ten years of 365 days: the longest delay, timeout or keep rota takes.
TEN_YEARS: Final = 10 * 365 * DAY
#: The longest a job is delayed: by ``delay`` at enqueue, ``Retry(delay=)`` or a
#: handler's backoff (the HTTP API's ``delay`` alike).
MAX_DELAY: Final = TEN_YEARS


class Bound(NamedTuple):
    """A closed range ``lo`` to ``hi``; ``whole``: an integer (a count, not a time);
    ``off``: 0 is taken too, and turns the thing off (``loop_block_warn``)."""

    lo: float
    hi: float
    whole: bool = False
    off: bool = False

    def __str__(self) -> str:
        within = f"from {_text(self.lo)} to {_text(self.hi)}"
        return f"0 (off) or {within}" if self.off else within


def _text(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def _count(lo: int, hi: int) -> Bound:
    return Bound(lo, hi, whole=True)


#: Every numeric setting (rota.config.Settings), in seconds for the durations.
SETTINGS: Final[dict[str, Bound]] = {
    "shards": _count(1, MAX_SHARDS),
    "concurrency": _count(1, 10_000),
    "lease": Bound(0.1, DAY),
    "heartbeat_interval": Bound(0.01, HOUR),
    "grace": Bound(0, DAY),
    "max_lost": _count(1, 1000),
    "max_args_bytes": _count(1, 512 * 1024 * 1024),  # Redis's largest string
    "keep_result": Bound(0, TEN_YEARS),
    "keep_none": Bound(0, TEN_YEARS),
    "complete_max_count": _count(1, 100_000_000),
    "unique_ttl": Bound(0.001, TEN_YEARS),
    "wake_timeout": Bound(0.01, HOUR),
    "scheduler_interval": Bound(0.01, HOUR),
    "fetch_batch": _count(1, 10_000),
    "prefetch": _count(0, 10_000),
    "dead_max_count": _count(1, 100_000_000),
    "dead_max_age": Bound(0, TEN_YEARS),
    "forget_names_after": Bound(0, TEN_YEARS),
    "web_session_ttl": Bound(1, 365 * DAY),
    "durable_enqueue": _count(0, 100),
    "durable_timeout": Bound(0.001, HOUR),
    "ride_through": Bound(0, DAY),
    "loop_block_warn": Bound(0.01, HOUR, off=True),
    "child_processes": _count(0, 1024),  # 0: the CPU count
    "child_memory_mb": Bound(64, 1024 * 1024, whole=True, off=True),
}

#: A handler's options (``@pool.job(...)``); None, where allowed, is "not set".
HANDLER: Final[dict[str, Bound]] = {
    "priority": _count(1, 100_000),
    "max_fails": _count(1, 1_000_000),
    "timeout": Bound(0.001, TEN_YEARS),
    "max_concurrency": _count(1, 1_000_000),
    "keep_result": Bound(0, TEN_YEARS),
    # The longest an attempt may go without a checkin or progress report (s).
    "idle_timeout": Bound(0.01, TEN_YEARS),
    "expires_in": Bound(0.001, TEN_YEARS),  # a default for its jobs, from their enqueue
}

#: A fair key's settings (``client.admin.fair.set_weight`` ...; see lua/_fair.lua).
FAIR: Final[dict[str, Bound]] = {
    "weight": _count(1, 1000),  # its share of its name's turns; default 1
    "limit": _count(1, 1_000_000),  # most of its jobs running at once
    "top": _count(1, 1000),  # keys a read of the largest backlogs returns
}

#: A job's options at enqueue (rota.client.spec.JobSpec; the HTTP API's fields alike).
JOB: Final[dict[str, Bound]] = {
    "delay": Bound(0, MAX_DELAY),
    "timeout": HANDLER["timeout"],
    "max_fails": HANDLER["max_fails"],
    "unique_ttl": SETTINGS["unique_ttl"],
    "expires_in": HANDLER["expires_in"],  # expires_at: a time, 1970 to 9999 (spec.py)
    "debounce_window": Bound(0.001, 30 * DAY),  # rota.client.debounce
}


def check(option: str, value: Any, bound: Bound) -> str | None:
    """What is wrong with ``value`` for ``option`` (one phrase, starting with the
    option's name, without saying where the value came from), or None when it is
    within ``bound``. A bool is no number here, though Python counts it as one."""
    kind = "a whole number" if bound.whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int if bound.whole else int | float):
        return f"{option}: must be {kind} {bound}, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{option}: must be a finite number, got {value!r}"
    if not (bound.lo <= value <= bound.hi or (bound.off and value == 0)):
        return f"{option}: must be {bound}, got {value!r}"
    return None


def first_wrong(values: Mapping[str, Any], table: Mapping[str, Bound]) -> str | None:
    """What is wrong with the first of ``values`` out of its range in ``table`` (see
    :func:`check`; a name the table lacks is not checked here), or None."""
    for option, value in values.items():
        bound = table.get(option)
        wrong = None if bound is None else check(option, value, bound)
        if wrong is not None:
            return wrong
    return None


def checked(option: str, value: T, bound: Bound) -> T:
    """``value`` when it is within ``bound``, else a ValueError that names ``option``."""
    wrong = check(option, value, bound)
    if wrong is not None:
        raise ValueError(wrong)
    return value
