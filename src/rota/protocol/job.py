"""Job states, failure reasons and the fields of a job hash.

These strings are part of protocol v4: services in other languages read and write them.
"""

from __future__ import annotations

import math
import os
import re
import string
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

__all__ = [
    "EXTRA_FIELDS",
    "FETCH_FIELDS",
    "MAX_MS",
    "NAME_RE",
    "JobRecord",
    "JobSet",
    "Reason",
    "State",
    "count_of",
    "field_int",
    "field_seconds",
    "field_text",
    "malformed_time",
    "ms_time",
    "new_id",
    "now_ms",
    "opt_int",
    "reply_int",
    "reply_text",
    "state_text",
    "utc_time",
    "validate_name",
]

#: The sorted sets of jobs outside the queues: due later, to retry, dead, waiting.
JobSet = Literal["scheduled", "retry", "dead", "waiting"]
#: A job name (and a job id given by a producer): what key names can hold safely.
NAME_RE: Final = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")


_ID_DIGITS: Final = string.digits + string.ascii_letters
#: Each random byte read as one of the 62 digits (bytes 0-247 evenly, so the digits
#: 0-7 come a little more often: 5.95 of 5.954 bits per character).
_ID_TABLE: Final = bytes(ord(_ID_DIGITS[b % 62]) for b in range(256))


def new_id() -> str:
    """A new job id: 17 random letters and digits (about 101 bits; Sidekiq's ids carry
    96). Short on purpose: an id is written twice per queued job (its key and its queue
    entry), and at 17 characters the key ``{rota}:job:<id>`` fits Redis's 32-byte
    allocation where a 32-digit hex id needs 48 (protocol v4)."""
    return os.urandom(17).translate(_ID_TABLE).decode()


def now_ms() -> int:
    """The time as every script and record keeps it: ms since the epoch."""
    return int(time.time() * 1000)


def validate_name(name: str) -> str:
    """``name`` when it can be a job name, else a ValueError that says what can."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f"invalid job name {name!r}: use 1-128 letters, digits, '_', '.', ':' or '-'"
        )
    return name


class State(StrEnum):
    """Where a job is in its lifecycle; a job is always in exactly one of these."""

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETE = "complete"
    RETRY = "retry"
    DEAD = "dead"
    WAITING = "waiting"
    ABORTED = "aborted"
    #: Read only, never written: a record whose state field is none of the above, or
    #: missing where the record has no name either (written by something else than
    #: rota's scripts). A record with a name and no state is queued (protocol v4).
    UNKNOWN = "unknown"


class Reason(StrEnum):
    """Machine-readable reason of a failure, kept in the job's ``reason`` field."""

    ERROR = "error"
    RETRY = "retry"
    TIMEOUT = "timeout"
    LOST = "lost"
    ABORTED = "aborted"
    INVALID_ARGS = "invalid_args"
    UNKNOWN_JOB = "unknown_job"
    BAD_PAYLOAD = "bad_payload"
    DEPENDENCY_FAILED = "dependency_failed"
    #: The attempt went ``idle_timeout`` seconds without a checkin or a progress report.
    IDLE = "idle"
    EXPIRED = "expired"  # not started before its expiry (expires_in, expires_at)
    #: The child process of an isolated handler died under the attempt.
    CRASHED = "crashed"
    #: An operator sent the job from the retry set to the dead set (``Admin.kill``).
    KILLED = "killed"


#: The fields the fetch script returns for each leased job, in this order (after the id).
FETCH_FIELDS: Final = (
    "name",
    "token",
    "attempts",
    "failures",
    "lost",
    "args",
    "enqueued_at",
    "extra",  # b"" for none of EXTRA_FIELDS, else b"1" and they follow
)

#: What the fetch script adds after a job's ``extra`` entry when any of them is set.
EXTRA_FIELDS: Final = ("max_fails", "timeout", "deps", "traceparent", "tracestate", "expires")


# The readers of a hash's fields (bytes as redis-py returns them, or text), lenient as
# every reader of records is: a field that is not a number reads as absent (0 or None).

#: The latest time a record may name: 9999-12-31T23:59:59Z in ms (``rota.client.spec.MAX_EPOCH``;
#: ``MAX_MS`` of ``lua/_base.lua``). A due time past it is no time rota waits for.
MAX_MS: Final = 253_402_300_799_000


_INT64: Final = 2**63


def _whole(value: Any) -> int | None:
    """``value`` as a 64-bit integer, or None: what no integer field of rota holds (text,
    NaN, infinity, 1e300) reads as absent."""
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):  # a float's infinity overflows
            try:
                real = float(value)
            except (TypeError, ValueError):
                return None
            if not math.isfinite(real):
                return None
            number = int(real)
    return number if -_INT64 <= number < _INT64 else None


def reply_int(value: Any, default: int = 0) -> int:
    """An integer of a script's reply or a record's field, however it is written:
    ``b"42"``, ``b"1.7e+15"`` (Lua prints a number of 15 digits and more so, and other
    writers may too), ``42.0``; ``default`` for text, NaN, infinity, none, or one past
    64 bits."""
    number = _whole(value)
    return default if number is None else number


def field_int(value: bytes | str | None) -> int:
    """A count: absent or not a number reads as 0."""
    return reply_int(value)


def count_of(reply: Any) -> int:
    """A count as a reply holds it (a length, a cardinality, a counter field): an
    integer, or the text of one. Anything else (an error reply, a missing field, text,
    NaN, a negative written by hand) is 0, so that a page or a total never fails on it."""
    number = reply if isinstance(reply, int) else _whole(reply) if reply else None
    return max(0, number or 0)


def opt_int(value: bytes | str | None) -> int | None:
    """A number that may be absent: absent, empty or not a number reads as None."""
    return _whole(value) if value else None


def utc_time(seconds: float | None) -> datetime | None:
    """A stored time (seconds since the epoch) as an aware UTC datetime: the one
    conversion every reader makes, since a record may hold anything. None for none, and
    for a time no datetime holds (before year 1, past 9999, not finite)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def ms_time(ms: float | None) -> datetime | None:
    """:func:`utc_time` of a time in ms, as records and scores hold them."""
    try:
        return utc_time(None if ms is None else ms / 1000)
    except OverflowError:  # an int too large for a float
        return None


def malformed_time(ms: float) -> str:
    """How a reader shows a stored time (in ms, as records hold them) that
    :func:`utc_time` finds no moment for."""
    try:
        text = f"{float(ms):.6g}"
    except OverflowError:
        text = "past 1e308"
    return f"malformed: {text} ms"


def _opt_float(value: bytes | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def reply_text(value: Any) -> str:
    """Text of a Redis reply that is bytes (rota never asks redis-py to decode)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def field_text(value: bytes | str | None) -> str | None:
    """A text field; None when absent."""
    return None if value is None else reply_text(value)


def field_seconds(ms: bytes | str | None) -> float | None:
    """A time stored in ms, in seconds; None when absent or not a number."""
    value = opt_int(ms)
    return None if value is None else value / 1000


_STATES: dict[str, State] = {s.value: s for s in State}


def state_text(state: bytes | str | None, name: bytes | str | None) -> str:
    """A job's state as its hash holds it: a record with a name and no state field is
    queued (protocol v4 leaves the state of a queued job out); ``unknown`` for a record
    with neither, or an empty state."""
    if state is None:
        return State.QUEUED.value if name else State.UNKNOWN.value
    return reply_text(state) or State.UNKNOWN.value


def _state(value: bytes | None, name: bytes | None) -> State:
    return _STATES.get(state_text(value, name), State.UNKNOWN)


def _expiry(ms: bytes | None) -> float | None:
    """A record's expiry as the scripts read it (``expiry_of`` in ``lua/_expiry.lua``): a
    time past 0 and up to :data:`MAX_MS`, else none, so that a record never shows an
    expiry its job does not have."""
    value = opt_int(ms)
    return value / 1000 if value is not None and 0 < value <= MAX_MS else None


_COUNTS: Final = ("attempts", "failures", "lost", "pending", "max_fails", "timeout")
_TIMES: Final = ("enqueued_at", "run_at", "started_at", "finished_at", "expires")
_NUMBERS: Final = tuple((f, f.encode(), f in _TIMES) for f in (*_COUNTS, *_TIMES))


def _malformed(h: Mapping[Any, Any]) -> tuple[str, ...]:
    """The numeric fields of a job hash that hold no finite number, or (the times) no
    time a datetime holds, as name=value: what a reader shows instead of a time."""
    bad = []
    for name, key, is_time in _NUMBERS:
        raw = h.get(key)
        if not raw:
            continue
        try:
            number = float(raw)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or (is_time and ms_time(number) is None):
            bad.append(f"{name}={reply_text(raw)[:40]!r}")
    return tuple(bad)


class JobRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A job as stored in its hash, read leniently: other services may write odd fields.

    ``args`` and ``result`` are the stored JSON text, untouched; ``args_value`` and
    ``result_value`` decode them. Times are seconds since the epoch (the hash holds
    milliseconds), as everywhere in rota's API.
    """

    id: str
    name: str
    state: State
    args: Annotated[str | None, Meta(description="the args as stored: JSON text")]
    attempts: int = 0
    failures: int = 0
    lost: int = 0
    enqueued_at: float | None = None
    run_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    max_fails: int | None = None
    timeout: float | None = None
    unique_key: str | None = None
    pool: str | None = None
    error: str | None = None
    reason: str | None = None
    result: str | None = None
    progress: str | None = None
    raw: str | None = None
    after: Annotated[tuple[str, ...], Meta(description="ids of the jobs it waits for")] = ()
    pending: Annotated[int, Meta(description="how many of them are not complete yet")] = 0
    group: Annotated[str | None, Meta(description="the group it is a member of")] = None
    waits_group: Annotated[str | None, Meta(description="the group it is the callback of")] = None
    malformed: Annotated[
        tuple[str, ...],
        Meta(
            description="fields holding no number, or no time from year 1 to 9999"
            " (written by others): name=value, each read as absent"
        ),
    ] = ()
    expires: Annotated[
        float | None,
        Meta(description="when it expires unstarted (epoch seconds; none: it never does)"),
    ] = None
    debounce_key: Annotated[str | None, Meta(description="its debounce key (see Debounce)")] = None
    absorbed: Annotated[
        int, Meta(description="how many enqueues of its debounce key it took in")
    ] = 0
    fair_key: Annotated[
        str | None, Meta(description="its fair key (the record's 'fair'): a tenant of its name")
    ] = None

    @classmethod
    def from_hash(cls, job_id: str, h: Mapping[Any, Any]) -> JobRecord:
        g = h.get
        return cls(
            id=job_id,
            name=field_text(g(b"name")) or "",
            state=_state(g(b"state"), g(b"name")),
            args=field_text(g(b"args")),
            attempts=field_int(g(b"attempts")),
            failures=field_int(g(b"failures")),
            lost=field_int(g(b"lost")),
            enqueued_at=field_seconds(g(b"enqueued_at")),
            run_at=field_seconds(g(b"run_at")),
            started_at=field_seconds(g(b"started_at")),
            finished_at=field_seconds(g(b"finished_at")),
            max_fails=opt_int(g(b"max_fails")),
            timeout=_opt_float(g(b"timeout")),
            unique_key=field_text(g(b"unique_key")),
            pool=field_text(g(b"pool")),
            error=field_text(g(b"error")),
            reason=field_text(g(b"reason")),
            result=field_text(g(b"result")),
            progress=field_text(g(b"progress")),
            raw=field_text(g(b"raw")),
            after=tuple((field_text(g(b"after")) or "").split()),
            pending=field_int(g(b"pending")),
            group=field_text(g(b"group")),
            waits_group=field_text(g(b"waits_group")),
            malformed=_malformed(h),
            expires=_expiry(g(b"expires")),
            debounce_key=field_text(g(b"debounce_key")),
            absorbed=field_int(g(b"absorbed")),
            fair_key=field_text(g(b"fair")),
        )

    @property
    def args_value(self) -> Any:
        return msgspec.json.decode(self.args) if self.args is not None else None

    @property
    def result_value(self) -> Any:
        return msgspec.json.decode(self.result) if self.result else None
