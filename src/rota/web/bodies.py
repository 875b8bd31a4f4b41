"""The bodies of the JSON API, as msgspec types: the views build them, the API encodes
them, and the OpenAPI document is generated from them (:mod:`rota.web.schemas`), so a
field added here, or to a type of rota's own that a body extends (``QueueInfo``,
``LivePool``, ``RunningJob``, ``GroupProgress``, ``JobRecord``), is sent and documented
at once.

Bodies that add to one of rota's types subclass it: the JSON is the type's fields in
order (a field the subclass replaces keeps its place), then the added ones. A subclass
of a type that is not ``kw_only`` is not either: msgspec puts keyword-only fields last,
which would move a replaced field. Times are ms since the epoch throughout the JSON API.
Limits the API checks itself, to answer with its own words, are shown to the document
only (``extra_json_schema``), with the same constants as the checks.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeVar

import msgspec
from msgspec import Meta

from rota.operations import LivePool, QueueInfo, RunningJob
from rota.protocol.job import NAME_RE, JobSet
from rota.spec import Enqueued
from rota.workflow import GroupProgress as Progress

__all__ = [
    "BODIES",
    "MAX_DELAY",
    "MAX_EPOCH",
    "MAX_FAILS",
    "MAX_IDS",
    "MAX_LIMIT",
    "MAX_UNIQUE",
    "NAME_PATTERN",
    "REF",
    "SUMMARY",
    "Aborted",
    "Bucket",
    "Busy",
    "BusyWorker",
    "Cleared",
    "Dashboard",
    "Deleted",
    "Edge",
    "EdgeKind",
    "EnqueueRequest",
    "Enqueued",
    "Error",
    "Flow",
    "Group",
    "GroupProgress",
    "Ids",
    "JobDetail",
    "JobPage",
    "JobProgress",
    "JobTimes",
    "LimitRequest",
    "Pool",
    "Pools",
    "Queue",
    "QueueLimit",
    "QueueRate",
    "QueueState",
    "Queues",
    "RateRequest",
    "Redis",
    "Related",
    "Retried",
    "extend",
]

NAME_PATTERN: Final = NAME_RE.pattern
MAX_IDS: Final = 1000
MAX_DELAY: Final = 10 * 365 * 86400.0
MAX_EPOCH: Final = 253402300799.0  # 9999-12-31T23:59:59Z
MAX_FAILS: Final = 1_000_000
MAX_LIMIT: Final = 1_000_000
MAX_UNIQUE: Final = 1024
#: Where the OpenAPI document keeps the schema of a body type.
REF: Final = "#/components/schemas/{name}"

S = TypeVar("S", bound=msgspec.Struct)

Ms = Annotated[int, Meta(description="ms since the epoch")]
EdgeKind = Literal["after", "group"]


def _doc(**schema: Any) -> Meta:
    """Limits shown in the document only: the API checks them itself."""
    return Meta(extra_json_schema=schema)


def extend(kind: type[S], base: msgspec.Struct, **fields: Any) -> S:
    """A ``kind`` (a subclass of ``base``'s type) with ``base``'s fields, and ``fields``
    added or replaced."""
    return kind(**{**msgspec.structs.asdict(base), **fields})


class Error(msgspec.Struct):
    """Every refusal: a 4xx (or 503) status and what was wrong."""

    error: str


class Bucket(msgspec.Struct):
    """One UTC minute or day of the dashboard's history."""

    start: Ms
    processed: int
    failed: int


class Dashboard(msgspec.Struct):
    namespace: str
    totals: dict[str, int]
    sizes: dict[str, int]
    minutes: list[Bucket]
    days: list[Bucket]


class Queue(QueueInfo, frozen=True, kw_only=True):
    done_per_second: Annotated[float, Meta(description="completed per second over the last minute")]


class Queues(msgspec.Struct):
    queues: list[Queue]


class Pool(LivePool, frozen=True, kw_only=True):
    # The snapshot's list of busy workers is replaced by their number, counted from the
    # running sets (exact at the read); ``/api/busy`` lists them.
    busy: Annotated[int, Meta(description="jobs it is running now")]  # type: ignore[assignment]


class Pools(msgspec.Struct):
    pools: list[Pool]
    heartbeat_interval: float


class BusyWorker(RunningJob, frozen=True, kw_only=True):
    host: str
    pid: int


class Busy(msgspec.Struct):
    workers: list[BusyWorker]


class JobTimes(msgspec.Struct, kw_only=True):
    """A job record's times as the JSON API carries them (the record has seconds)."""

    enqueued_at: Ms | None
    run_at: Ms | None
    started_at: Ms | None
    finished_at: Ms | None


#: The fields of a job record that a page of a job set shows for each job.
SUMMARY: Final = (
    "id",
    "name",
    "state",
    "args",
    "attempts",
    "failures",
    "enqueued_at",
    "run_at",
    "finished_at",
    "reason",
    "error",
    "after",
    "pending",
    "group",
    "waits_group",
)


class JobPage(msgspec.Struct, kw_only=True):
    set: JobSet
    q: str
    total: int
    offset: int
    limit: int
    searched: Annotated[int | None, Meta(description="jobs read by a search")]
    #: Each a projection of a job record (:data:`SUMMARY`), documented
    #: as such by :mod:`rota.web.schemas`.
    jobs: list[Annotated[dict[str, Any], _doc(**{"$ref": REF.format(name="JobSummary")})]]


class Related(msgspec.Struct):
    """A job tied to another one."""

    id: str
    name: str | None
    state: Annotated[str, Meta(description="'missing' when its record is gone")]


class JobProgress(msgspec.Struct):
    """A running job's last ``ctx.progress``, read."""

    percent: float | None
    message: str


class GroupProgress(Progress, frozen=True):
    finished: Annotated[bool, Meta(description="every member complete, dead or aborted")]

    @classmethod
    def of(cls, progress: Progress, **fields: Any) -> Self:
        """``progress`` with ``finished`` (a property there), and ``fields``."""
        return extend(cls, progress, finished=progress.finished, **fields)


class JobDetail(JobTimes, kw_only=True):
    """Everything about one job: its record's fields (the times in ms), its args and
    result decoded, its log lines and the jobs it is tied to."""

    args: Annotated[Any, Meta(description="the args decoded (null when they are not JSON)")]
    args_raw: str | None
    args_pretty: str | None
    result: Annotated[Any, Meta(description="the result decoded")]
    result_raw: str | None
    result_pretty: str | None
    progress: JobProgress | None
    progress_raw: str | None
    logs: list[str]
    parents: Annotated[
        list[Related], Meta(description="the jobs it waits for, in the order of after")
    ]
    children: Annotated[
        list[Related], Meta(description="the jobs enqueued after it, oldest first (at most 500)")
    ]
    children_total: int
    callback: Annotated[
        Related | None, Meta(description="for a member of a group: the group's callback")
    ]
    group_progress: Annotated[
        GroupProgress | None, Meta(description="the group it is a member or the callback of")
    ]


class Group(GroupProgress, frozen=True):
    """A group's progress, its callback (the job, where the progress has its id), and a
    page of its members."""

    then: Annotated[Related | None, Meta(description="the callback")]  # type: ignore[assignment]
    offset: int
    limit: int
    members: list[Related]


class Edge(msgspec.Struct, kw_only=True):
    from_: Annotated[str, Meta(description="the parent")] = msgspec.field(name="from")
    to: Annotated[str, Meta(description="the child")]
    kind: Annotated[
        EdgeKind,
        Meta(description="after: enqueued after; group: a member and its group's callback"),
    ]


class Flow(msgspec.Struct, kw_only=True):
    id: str
    nodes: list[Related]
    edges: list[Edge]
    limit: Annotated[int, Meta(description="the most jobs a flow holds")]
    truncated: Annotated[bool, Meta(description="some jobs of the flow were left out")]


class Redis(msgspec.Struct):
    ping_ms: Annotated[float, Meta(description="round trip of a PING from the web server")]
    info: dict[str, Any]
    namespace: str


class QueueState(msgspec.Struct):
    name: str
    paused: bool


class QueueRate(msgspec.Struct):
    name: str
    rate: str | None


class QueueLimit(msgspec.Struct):
    name: str
    limit: int | None


class Cleared(msgspec.Struct):
    name: str
    deleted: int


class Retried(msgspec.Struct):
    retried: int


class Deleted(msgspec.Struct):
    deleted: int


class Aborted(msgspec.Struct):
    id: str
    was: Annotated[str, Meta(description="its state before")]


class RateRequest(msgspec.Struct, forbid_unknown_fields=True):
    rate: Annotated[
        str | None,
        Meta(
            description="jobs that may start per second, minute or hour, e.g. '100/s',"
            " '30/min', '2/hour'; null removes the limit"
        ),
    ]


class LimitRequest(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[
        Annotated[int, _doc(minimum=1, maximum=MAX_LIMIT)] | None,
        Meta(description="most jobs of the name running at once; null: no limit"),
    ]


class Ids(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The jobs to act on: {"ids": [...]} or {"all": true}."""

    #: What the fields' types cannot say, added to the document's schema.
    rules: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {"required": ["ids"]},
            {"required": ["all"], "properties": {"all": {"const": True}}},
        ]
    }

    ids: Annotated[list[str], _doc(minItems=1, maxItems=MAX_IDS)] | None = None
    all: Annotated[bool, Meta(description="true: every job of the set")] = False


class EnqueueRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A job to enqueue; ``args`` or ``kwargs``, ``delay`` or ``run_at``."""

    rules: ClassVar[dict[str, Any]] = {
        "not": {"anyOf": [{"required": ["args", "kwargs"]}, {"required": ["delay", "run_at"]}]}
    }

    name: Annotated[str, _doc(pattern=NAME_PATTERN)]
    args: Annotated[list[Any] | None, Meta(description="positional args")] = None
    kwargs: Annotated[dict[str, Any] | None, Meta(description="keyword args")] = None
    delay: Annotated[float, _doc(minimum=0, maximum=MAX_DELAY)] | None = None
    run_at: Annotated[
        Annotated[float, _doc(minimum=0, maximum=MAX_EPOCH)]
        | Annotated[str, _doc(format="date-time")]
        | None,
        Meta(description="epoch seconds or an ISO-8601 time (UTC if no offset)"),
    ] = None
    unique: Annotated[str, _doc(minLength=1, maxLength=MAX_UNIQUE)] | None = None
    max_fails: Annotated[int, _doc(minimum=1, maximum=MAX_FAILS)] | None = None
    timeout: Annotated[float, _doc(exclusiveMinimum=0, maximum=MAX_DELAY)] | None = None
    after: Annotated[
        Annotated[list[Annotated[str, _doc(pattern=NAME_PATTERN)]], _doc(maxItems=MAX_IDS)] | None,
        Meta(
            description="ids of jobs that must complete first; a job id that does not exist"
            " is a 422 and nothing is enqueued"
        ),
    ] = None


#: Every body the API sends or takes; each is a component of the OpenAPI document under
#: its class name.
BODIES: Final[tuple[type[msgspec.Struct], ...]] = (
    Error,
    Dashboard,
    Queues,
    Pools,
    Busy,
    JobPage,
    Group,
    Flow,
    Redis,
    QueueState,
    QueueRate,
    QueueLimit,
    Cleared,
    Retried,
    Deleted,
    Aborted,
    Enqueued,
    RateRequest,
    LimitRequest,
    Ids,
    EnqueueRequest,
)
