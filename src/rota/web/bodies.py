"""The bodies the JSON API sends, as msgspec types: the views build them, the API encodes
them, and the OpenAPI document is generated from them (:mod:`rota.web.schemas`), with the
bodies it takes (:mod:`rota.web.request_bodies`).

Times are ms since the epoch throughout the JSON API (:data:`Ms`), as Redis keeps them,
where rota's Python API has seconds. A body that shows one of rota's types with few
times subclasses it (``Queue``; ``GroupProgress``, which replaces its one time,
``created_at``, by :data:`Ms`): the JSON is the type's fields in order (a field the
subclass replaces keeps its place), then the added ones, and a field added to the type is
sent and documented at once. A body that shows a type with times (``Pool``,
``BusyWorker``) is a type of its own that ``mirrors`` it: the same fields in the same
order, the times as :data:`Ms`, and fields of its own; the document describes a mirrored
field as the type does, and a test fails when the type has a field its body does not
carry. :func:`mirror` builds either kind of body, turning the times from seconds into ms.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

import msgspec
from msgspec import Meta

from rota import inspect
from rota.client.spec import Enqueued
from rota.client.status import LivePool, QueueInfo, RunningJob
from rota.client.workflow import GroupProgress as Progress
from rota.client.workflow import Related
from rota.inspect import Edge, FlowView, ServerInfo, ShardView
from rota.inspect.members import MemberState
from rota.protocol.job import JobSet
from rota.protocol.snapshot import PoolIdentity
from rota.web.body_times import MS, REF, Ms, mirror, ms, ms_fields
from rota.web.request_bodies import REQUESTS

__all__ = [
    "BODIES",
    "MIRRORS",
    "MS",
    "REF",
    "SUMMARY",
    "Aborted",
    "Bucket",
    "Busy",
    "BusyWorker",
    "Cleared",
    "Cron",
    "CronJob",
    "CronState",
    "Dashboard",
    "Deleted",
    "Edge",
    "Enqueued",
    "Error",
    "Flow",
    "Group",
    "GroupProgress",
    "JobDetail",
    "JobPage",
    "JobProgress",
    "JobTimes",
    "Ms",
    "NameMinute",
    "NameStats",
    "Pool",
    "Pools",
    "Queue",
    "QueueJobs",
    "QueueLimit",
    "QueueRate",
    "QueueState",
    "QueuedJob",
    "Queues",
    "Redis",
    "Related",
    "Retried",
    "mirror",
    "ms",
    "ms_fields",
]


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
    served: Annotated[
        bool, Meta(description="a live pool serves this name (none: its jobs wait for one)")
    ] = True


class Queues(msgspec.Struct):
    """A page of the queues, the busiest first (queued and running jobs), then by name."""

    queues: list[Queue]
    total: Annotated[int, Meta(description="job names in all")] = 0
    offset: int = 0
    limit: int = 100


class NameMinute(msgspec.Struct):
    """One UTC minute of a job name."""

    start: Ms
    processed: Annotated[int, Meta(description="jobs of the name completed")]
    failed: Annotated[int, Meta(description="failed attempts of the name")]
    ran_ms: Annotated[int, Meta(description="ms its complete jobs ran, summed")]
    mean_ms: Annotated[
        float | None, Meta(description="mean run time of its complete jobs (none: none)")
    ]


class NameStats(msgspec.Struct):
    """A job name's minutes, oldest first; the last one is the current minute."""

    name: str
    minutes: list[NameMinute]


class Pool(PoolIdentity, frozen=True, kw_only=True):
    """A live pool: rota's ``LivePool``, its times in ms."""

    mirrors: ClassVar[type[msgspec.Struct]] = LivePool

    started_at: Ms
    heartbeat_at: Ms
    heartbeat_interval: float
    # The snapshot's list of busy workers is replaced by their number, counted from the
    # running sets (exact at the read); ``/api/busy`` lists them.
    busy: Annotated[int, Meta(description="jobs it is running now")]
    periodic: Annotated[
        list[str], Meta(description="the names of the periodic jobs it fires (see /api/cron)")
    ]
    last_heartbeat: Ms
    stale: bool


class Pools(msgspec.Struct):
    pools: list[Pool]
    heartbeat_interval: float


class CronJob(msgspec.Struct):
    """A periodic job as the live pools fire it: its cron expression and zone, the next
    fire time (the soonest any pool has), the last one a pool saw come (None: none since
    the pools started) and the pools that fire it (each fire time is enqueued once, by
    the pool that claims it)."""

    name: str
    cron: str
    tz: str
    next_at: Ms
    last_at: Ms | None
    pools: list[str]
    enabled: Annotated[
        bool, Meta(description="false: turned off, its fire times pass without a job")
    ] = True
    off_since: Annotated[Ms | None, Meta(description="when it was turned off")] = None


class Cron(msgspec.Struct):
    periodic: list[CronJob]


class BusyWorker(msgspec.Struct, kw_only=True):
    """A job running now: rota's ``RunningJob``, its times in ms, and the host and pid of
    its pool."""

    mirrors: ClassVar[type[msgspec.Struct]] = RunningJob

    job_id: str
    name: str
    pool: str
    since: Ms
    deadline: Ms
    progress: str
    message: str
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
    size: Annotated[
        int | None,
        Meta(description="jobs in the set when searched: a search read them all when equal"),
    ] = None
    start: Annotated[
        int,
        Meta(description="where in the set a search began (from): it read start to searched"),
    ] = 0
    #: Each a projection of a job record (:data:`SUMMARY`), documented
    #: as such by :mod:`rota.web.schemas`.
    jobs: list[
        Annotated[dict[str, Any], Meta(extra_json_schema={"$ref": REF.format(name="JobSummary")})]
    ]


class QueuedJob(inspect.QueuedJob, kw_only=True):
    """A job waiting in a queue, as the queue's page lists it: its args cut short."""

    enqueued_at: Ms | None


class QueueJobs(inspect.QueueView, kw_only=True):
    """A page of the jobs waiting in one queue, in the order asked for."""

    jobs: list[QueuedJob]  # type: ignore[assignment]


class JobProgress(msgspec.Struct):
    """A running job's last ``ctx.progress``, read."""

    percent: float | None
    message: str


class GroupProgress(Progress, frozen=True):
    created_at: Ms | None  # when it was made; seconds in the Python type
    finished: Annotated[bool, Meta(description="every member complete, dead or aborted")]


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
    unserved: Annotated[list[str], Meta(description="unfinished parents' names no pool serves")]
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
    failed_members: Annotated[
        list[Related],
        Meta(description="members that ended dead or aborted, wherever they are (at most 100)"),
    ] = msgspec.field(default_factory=list)
    state: Annotated[
        MemberState | None, Meta(description="the members' state the page keeps (none: all)")
    ] = None
    matching: Annotated[int | None, Meta(description="members in that state")] = None
    scanned: Annotated[
        int | None,
        Meta(description="members read to find them: fewer than total when it stopped"),
    ] = None


class Flow(FlowView, kw_only=True):
    """The graph of the workflow a job belongs to."""


class Redis(ServerInfo):
    namespace: str


class Shards(msgspec.Struct):
    """Each shard of the namespace (one unless the setting ``shards`` is more): its hash
    tag, slot and server, and the jobs it holds; the other pages show their sum."""

    namespace: str
    shards: list[ShardView]


# -- the answers to actions: what changed, and how much


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


class CronState(msgspec.Struct):
    name: str
    enabled: bool


#: The bodies that mirror one of rota's types (``mirrors``).
MIRRORS: Final[tuple[type[Pool | BusyWorker], ...]] = (Pool, BusyWorker)

#: Every body the API sends or takes; each is a component of the OpenAPI document under
#: its class name.
BODIES: Final[tuple[type[msgspec.Struct], ...]] = (
    Error,
    Dashboard,
    Queues,
    QueueJobs,
    NameStats,
    Pools,
    Cron,
    Busy,
    JobPage,
    Group,
    Flow,
    Redis,
    Shards,
    QueueState,
    QueueRate,
    QueueLimit,
    CronState,
    Cleared,
    Retried,
    Deleted,
    Aborted,
    Enqueued,
    *REQUESTS,
)
