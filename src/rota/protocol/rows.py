"""The rows the hot scripts take and return, named: a job to enqueue, a leased job, and
the outcome of an attempt (one type per kind).

A job to enqueue and a leased job are what goes over the wire already (the same values
in the same order: tuples encode as MessagePack arrays), so naming them costs nothing
per job; an outcome is written in the finish script's terms by
:func:`rota.protocol.calls.finish` alone. The scripts' headers in ``lua/`` say the same
contract from the other side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Final, NamedTuple, Protocol, Self

from rota.protocol.job import EXTRA_FIELDS, FETCH_FIELDS, Reason, opt_int

__all__ = [
    "MAX_ERROR",
    "MAX_LOG",
    "Aborted",
    "Complete",
    "Dead",
    "Drop",
    "EnqueueRow",
    "Fetched",
    "Lease",
    "Outcome",
    "Requeue",
    "Retry",
]

#: The longest error text an outcome stores (characters).
MAX_ERROR: Final = 4000
#: The longest line of a job's log (characters), a traceback an outcome carries too.
MAX_LOG: Final = 2000


def _text(text: str, limit: int = MAX_ERROR) -> str:
    """``text`` cut to ``limit`` characters, its lone surrogates written as escapes
    (``\\ud800``): an error message is any string a handler made, and one that UTF-8
    cannot carry would stop the finish of every outcome sent with it."""
    text = text[:limit]
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="backslashreplace").decode()
    return text


class EnqueueRow(NamedTuple):
    """One job for the ``enqueue`` script (its arguments, in order) or an entry of
    ``enqueue_batch`` (see :mod:`rota.protocol.calls`); ``""`` means none, as the
    scripts take it."""

    id: str
    name: str
    args: bytes  # the JSON text of the args, encoded once
    now: int  # ms; enqueue_batch takes it once per call instead
    run_at: int  # ms; 0: now
    unique: str
    unique_ttl: int  # ms
    max_fails: int | str
    timeout: float | str
    after: str  # the parents' ids, space-separated
    group: str  # the group it is a member of
    waits_group: str  # the group it is the callback of
    traceparent: str = ""  # the W3C trace context of the enqueue
    tracestate: str = ""
    group_size: int = 0  # how many members its group has (a member only)
    expires: int = 0  # ms since the epoch after which it never starts; 0: never
    fair: str = ""  # its fair key; '': none
    debounce_key: str = ""  # its debounce key (see lua/_debounce.lua); "": none
    debounce_ms: int = 0  # the debounce window (ms)
    debounce_mode: str = ""  # "first", "extend" or "replace"
    debounce_move: bool = True  # a replace moves the run time too
    #: Routed by its name (rota.protocol.shards): its name's jobs share a shard, so they
    #: start in enqueue order. Routing only: no script takes it.
    ordered: bool = False


_WIDTH: Final = 1 + len(FETCH_FIELDS)
_EXTRA: Final = len(EXTRA_FIELDS)


def _int(raw: bytes, default: int = 0) -> int:
    try:
        return int(raw)
    except ValueError:
        return default


def _timeout(raw: bytes) -> float | None:
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None
    return None if value is not None and math.isnan(value) else value  # no NaN deadline


@dataclass(slots=True)
class Fetched:
    """A leased job as the fetch script returns it: the id, then ``FETCH_FIELDS``, then
    ``EXTRA_FIELDS`` when its ``extra`` entry says so."""

    id: str
    name: str
    token: str
    attempts: int
    failures: int
    lost: int
    args: bytes
    enqueued_at: int
    max_fails: int | None
    timeout: float | None
    deps: bool = False  # it waited for other jobs: their results are in its record
    trace: tuple[str, str] = ("", "")  # the enqueue's traceparent and tracestate
    shard: int = 0  # the shard of its namespace it was leased from (rota.protocol.shards)
    expires: int = 0  # ms: it must not start from then on (its record's or its handler's)

    @classmethod
    def parse(cls, flat: list[bytes]) -> list[Fetched]:
        out = []
        i, end = 0, len(flat)
        while i + _WIDTH <= end:
            (jid, name, token, attempts, failures, lost, args, enq, extra) = flat[i : i + _WIDTH]
            i += _WIDTH
            if not extra:
                try:  # the usual row, read without a call per field
                    out.append(
                        cls(
                            jid.decode(),
                            name.decode(),
                            token.decode(),
                            int(attempts or 0),
                            int(failures or 0),
                            int(lost or 0),
                            args,
                            int(enq or 0),
                            None,
                            None,
                        )
                    )
                    continue
                except ValueError:
                    pass  # a counter that is not a number: read leniently below
            max_fails = timeout = deps = parent = state = expires = b""
            if extra:
                (max_fails, timeout, deps, parent, state, expires) = flat[i : i + _EXTRA]
                i += _EXTRA
            out.append(
                cls(
                    jid.decode(),
                    name.decode(),
                    token.decode(),
                    _int(attempts),
                    _int(failures),
                    _int(lost),
                    args,
                    _int(enq),
                    opt_int(max_fails),
                    _timeout(timeout),
                    deps == b"1",
                    (parent.decode(errors="replace"), state.decode(errors="replace"))
                    if parent
                    else ("", ""),
                    expires=_int(expires),
                )
            )
        return out


class Lease(Protocol):
    """What fences an outcome: the job and the token of its lease."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def token(self) -> str: ...


# Each kind is a NamedTuple of its fields (built without a Python call: tuple.__new__),
# and a subclass of it with what every kind answers: kind, failed, reason, error, ...


class _Kind:
    __slots__ = ()
    kind: ClassVar[str]
    failed: ClassVar[bool] = True  # anything but done or given back: worth a warning
    keeps_result: ClassVar[bool] = False
    log: ClassVar[str] = ""  # a line for the job's log, written by the finish (see Retry)


class _CompleteFields(NamedTuple):
    id: str
    name: str
    token: str
    result: str
    keep_ms: str
    keep_none_ms: str = ""


class Complete(_CompleteFields):
    """Done: ``result`` is its JSON (``""``: none), its record kept ``keep_ms`` (0:
    deleted now); a record without result, waiter, children or group is kept
    ``keep_none_ms`` instead (``""``: ``keep_ms``). The keeps are text, as the finish
    script takes them: the runner makes them once per job name and builds a complete
    outcome with one ``tuple.__new__`` call."""

    __slots__ = ()
    kind: ClassVar = "complete"
    failed: ClassVar = False
    reason: ClassVar = ""
    error: ClassVar = ""
    log: ClassVar = ""

    @classmethod
    def of(cls, job: Lease, result: str, keep_ms: int, keep_none_ms: int | None = None) -> Complete:
        none = "" if keep_none_ms is None else str(keep_none_ms)
        return cls(job.id, job.name, job.token, result, str(keep_ms), none)

    @property
    def keeps_result(self) -> bool:
        """Done with a result kept for a while: it grows Redis's memory."""
        return self.result != "" and self.keep_ms not in ("", "0")


class _RetryFields(NamedTuple):
    id: str
    name: str
    token: str
    due: int  # ms
    error: str
    reason: Reason
    log: str = ""


class Retry(_RetryFields, _Kind):
    """Failed: runs again at ``due``. ``log``, when not empty, is a line (at most
    :data:`MAX_LOG`) the finish adds to the job's log: a handler's traceback, written
    with the outcome instead of in a call of its own."""

    __slots__ = ()
    kind: ClassVar = "retry"

    @classmethod
    def of(cls, job: Lease, due: int, error: str, reason: Reason) -> Retry:
        return cls(job.id, job.name, job.token, due, _text(error), reason)


class _EndFields(NamedTuple):
    id: str
    name: str
    token: str
    reason: Reason
    error: str
    log: str = ""


class Dead(_EndFields, _Kind):
    """Failed for good: kept in the dead set, with ``log`` as :class:`Retry` has it
    (a dropped job's log is deleted with it: the finish writes none)."""

    __slots__ = ()
    kind: ClassVar = "dead"

    @classmethod
    def of(cls, job: Lease, reason: Reason, error: str) -> Self:
        return cls(job.id, job.name, job.token, reason, _text(error))


class Drop(Dead):
    """Failed for good, and deleted (a handler with ``skip_dead``)."""

    __slots__ = ()
    kind: ClassVar = "drop"


class _AbortedFields(NamedTuple):
    id: str
    name: str
    token: str
    keep_ms: int
    message: str


class Aborted(_AbortedFields, _Kind):
    """Ended by an abort; the record is kept ``keep_ms`` (an abort's own keep wins)."""

    __slots__ = ()
    kind: ClassVar = "aborted"
    reason: ClassVar = ""

    @classmethod
    def of(cls, job: Lease, keep_ms: int, message: str) -> Aborted:
        return cls(job.id, job.name, job.token, keep_ms, _text(message))

    @property
    def error(self) -> str:
        return self.message


class _LeaseFields(NamedTuple):
    id: str
    name: str
    token: str


class Requeue(_LeaseFields, _Kind):
    """Not run (the pool is stopping): back to the front of its queue."""

    __slots__ = ()
    kind: ClassVar = "requeue"
    failed: ClassVar = False
    reason: ClassVar = ""
    error: ClassVar = ""

    @classmethod
    def of(cls, job: Lease) -> Requeue:
        return cls(job.id, job.name, job.token)


#: What the finish script records for one attempt: one type per kind, each with its own
#: fields; :func:`rota.protocol.calls.finish` is what writes them in the script's terms.
Outcome = Complete | Retry | Dead | Drop | Aborted | Requeue
