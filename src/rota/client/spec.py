"""What a producer asks for, checked once: a :class:`JobSpec` becomes the row the enqueue
scripts take, or an error that names the option.

The client, the CLI and the web API all enqueue through here, so they refuse the same
things with the same words (a timeout that is not positive, a NaN delay, a job id that
could not be a key...).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from rota.client.debounce import Debounce, checked_debounce
from rota.errors import PayloadTooLarge
from rota.protocol import codec
from rota.protocol.bounds import JOB, MAX_DELAY, check
from rota.protocol.job import NAME_RE, new_id, now_ms, validate_name
from rota.protocol.rows import EnqueueRow

__all__ = [
    "FAIR_KEY_RE",
    "MAX_EPOCH",
    "Enqueued",
    "JobSpec",
    "check_fair_key",
    "delay_seconds",
    "epoch_seconds",
    "finite",
    "moment_seconds",
    "to_row",
]


class Enqueued(msgspec.Struct, frozen=True):
    """What an enqueue returns (the stored job is a :class:`~rota.JobRecord`).
    ``created`` is False when nothing was enqueued because the id existed already or the
    unique key is held; ``id`` is then the holder's."""

    id: str
    name: str
    created: bool = True


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One job to enqueue, with args and options kept apart (see ``enqueue_many``)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    run_at: float | None = None  # seconds since the epoch
    delay: float | None = None  # seconds from now
    unique: str | None = None
    unique_ttl: float | None = None
    job_id: str | None = None
    max_fails: int | None = None
    timeout: float | None = None
    after: tuple[str, ...] = ()  # ids of jobs that must complete first
    #: Not started by then, it never starts (reason expired): seconds from now, or a
    #: time (a datetime or ISO-8601 text, naive as UTC, or seconds since the epoch); one
    #: of them at most.
    expires_in: float | None = None
    expires_at: datetime | float | str | None = None
    #: Debounce by key (see :class:`rota.client.debounce.Debounce`).
    debounce: Debounce | None = None
    #: The job's fair key (a tenant, a customer): within its job name, keys take turns
    #: (weighted round robin), FIFO within a key. 1..200 printable ASCII characters.
    fair_key: str | None = None
    #: Route it by its name, so that the name's jobs start in enqueue order across the
    #: shards (see rota.protocol.shards); the client's ``ordered`` names are routed so
    #: without it.
    ordered: bool = False


#: What a fair key may be: 1..200 printable ASCII characters, no space (a key of Redis
#: is built from it, and an operator types it).
FAIR_KEY_RE: Final = re.compile(r"^[!-~]{1,200}$")


def check_fair_key(key: object, option: str = "fair_key") -> str:
    """``key`` if it is a fair key, else a ValueError naming ``option``."""
    if not isinstance(key, str) or not FAIR_KEY_RE.match(key):
        raise ValueError(
            f"{option} must be 1 to 200 printable ASCII characters without spaces, got {key!r:.80}"
        )
    return key


def to_row(
    spec: JobSpec,
    max_args_bytes: int,
    unique_ttl: float,
    group: str = "",
    waits_group: str = "",
    group_size: int = 0,
) -> EnqueueRow:
    """The row of one job: its own options, checked, then the group it is a member of
    (of ``group_size`` members) and the group it is the callback of."""
    validate_name(spec.name)
    payload = codec.encode_args(spec.args, spec.kwargs)
    if len(payload) > max_args_bytes:
        raise PayloadTooLarge(
            f"args of job {spec.name!r} are {len(payload)} bytes encoded,"
            f" over the limit of {max_args_bytes}"
        )
    now = now_ms()
    ttl = unique_ttl if spec.unique_ttl is None else spec.unique_ttl
    _check(spec, ttl)
    expires = 0
    if spec.expires_in is not None or spec.expires_at is not None:  # no call for most jobs
        expires = _expires(spec, now)
    row = EnqueueRow(
        spec.job_id or new_id(),
        spec.name,
        payload,
        now,
        _run_at(spec, now),
        spec.unique or "",
        max(1, int(ttl * 1000)),
        "" if spec.max_fails is None else int(spec.max_fails),
        "" if spec.timeout is None else float(spec.timeout),
        " ".join(spec.after),
        group,
        waits_group,
        group_size=group_size,
        expires=expires,
        fair="" if spec.fair_key is None else check_fair_key(spec.fair_key),
        ordered=spec.ordered is True,
    )
    return row if spec.debounce is None else _debounced(row, spec.debounce)


def _debounced(row: EnqueueRow, debounce: Debounce) -> EnqueueRow:
    """``row`` debounced as ``debounce`` says, checked (see :mod:`rota.client.debounce`)."""
    db = checked_debounce(
        debounce,
        unique=bool(row.unique),
        scheduled=bool(row.run_at),
        linked=bool(row.after or row.group or row.waits_group),
    )
    return row._replace(
        debounce_key=db.key, debounce_ms=db.window_ms, debounce_mode=db.mode, debounce_move=db.move
    )


def _expires(spec: JobSpec, now: int) -> int:
    """When the job expires (ms since the epoch), its options checked: ``expires_in``
    within ``rota.protocol.bounds.JOB``, ``expires_at`` a time from 1970 to 9999 (one
    in the past expires the job at once)."""
    if spec.expires_in is not None and spec.expires_at is not None:
        raise ValueError("expires_in and expires_at: give one of them, not both")
    if spec.expires_in is not None:
        wrong = check("expires_in", spec.expires_in, JOB["expires_in"])
        if wrong is not None:
            raise ValueError(wrong)
        return now + max(1, round(spec.expires_in * 1000))
    at = spec.expires_at
    if isinstance(at, datetime | str):
        seconds = epoch_seconds("expires_at", moment_seconds("expires_at", at))
    else:
        seconds = epoch_seconds("expires_at", at)  # type: ignore[arg-type]  # None: not here
    return max(1, int(seconds * 1000))


#: The last second a time may name: 9999-12-31T23:59:59Z (what every entry point takes).
MAX_EPOCH: Final = 253402300799.0


def epoch_seconds(option: str, value: float) -> float:
    """``value`` as seconds since the epoch from 1970 to 9999, or a ValueError naming
    ``option``: the one rule for a time, in the client, the CLI and the HTTP API. A time
    in milliseconds (``time.time() * 1000``) lands tens of thousands of years ahead; it
    is refused, and the message says so."""
    number = finite(option, value)
    if not 0 <= number <= MAX_EPOCH:
        hint = " (milliseconds? rota takes seconds)" if number > MAX_EPOCH else ""
        raise ValueError(
            f"{option}: a time from 1970 to 9999 in seconds since the epoch, got {value!r}{hint}"
        )
    return number


def moment_seconds(option: str, when: datetime | str) -> float:
    """A datetime, or its ISO-8601 text, as seconds since the epoch; a time without an
    offset is UTC, in the client, the CLI and the HTTP API alike. Text that is no
    ISO-8601 time is a ValueError naming ``option``."""
    if isinstance(when, str):
        try:
            moment = datetime.fromisoformat(when)
        except ValueError:
            raise ValueError(f"{option}: {when[:60]!r} is not an ISO-8601 time") from None
    else:
        moment = when
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def delay_seconds(option: str, value: float) -> float:
    """``value`` as seconds from 0 to ten years (``rota.protocol.bounds.MAX_DELAY``, the
    HTTP API's and ``Retry``'s range too), or a ValueError naming ``option``: a delay in
    milliseconds is refused, and the message says so."""
    delay = finite(option, value)
    if not 0 <= delay <= MAX_DELAY:
        hint = " (milliseconds? rota takes seconds)" if delay > MAX_DELAY else ""
        raise ValueError(f"{option}: seconds {JOB['delay']} (ten years), got {value!r}{hint}")
    return delay


def _run_at(spec: JobSpec, now: int) -> int:
    """When the job is due (ms); 0 for now."""
    if spec.run_at is not None:
        return int(epoch_seconds("run_at", spec.run_at) * 1000)
    if spec.delay is not None:
        return now + int(delay_seconds("delay", spec.delay) * 1000)
    return 0


def _check(spec: JobSpec, ttl: float) -> None:
    """A ValueError (TypeError for a wrong kind of value) naming the first bad option;
    the ranges are ``rota.protocol.bounds.JOB``."""
    timeout = JOB["timeout"]
    if spec.timeout is not None and not timeout.lo <= finite("timeout", spec.timeout) <= timeout.hi:
        # Below a millisecond a timeout is no time a job can run in (1e-320 is a number,
        # and positive): the store keeps milliseconds.
        raise ValueError(
            f"timeout must be at least {timeout.lo} seconds and at most {timeout.hi:.0f}"
            f" (ten years), got {spec.timeout}"
        )
    if spec.job_id is not None and not NAME_RE.match(spec.job_id):
        raise ValueError(f"invalid job id {spec.job_id!r}")
    max_fails: Any = spec.max_fails
    if max_fails is not None and (not isinstance(max_fails, int) or isinstance(max_fails, bool)):
        raise ValueError(f"max_fails must be an integer, got {max_fails!r}")
    fails = JOB["max_fails"]
    if max_fails is not None and not fails.lo <= max_fails <= fails.hi:
        raise ValueError(
            f"max_fails must be at least 1 and at most {fails.hi:.0f}, got {max_fails}"
        )
    wrong = check("unique_ttl", ttl, JOB["unique_ttl"])
    if wrong is not None:
        raise ValueError(wrong)
    if spec.unique is not None and not spec.unique:
        raise ValueError("unique key must not be empty")
    if isinstance(spec.after, str):
        raise TypeError("after: give a list of job ids, not one string")
    for parent in spec.after:
        if not isinstance(parent, str) or not NAME_RE.match(parent):
            raise ValueError(f"after: invalid job id {parent!r}")


def finite(option: str, value: float) -> float:
    """``value`` as a float, or a ValueError naming ``option``. Only a number is one:
    ``"5"`` and ``True`` are refused, as JSON would not take them for one either."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{option} must be a number, got {value!r}")
    number = float(value) if isinstance(value, float) or abs(value) < 2**1023 else math.inf
    if not math.isfinite(number):
        raise ValueError(f"{option} must be a finite number, got {value!r}")
    return number
