"""What an operator looks at, read in as few round trips as the data allows: a job and
the jobs it is tied to, a group, a whole flow, the jobs waiting in a queue (:mod:`.queues`),
the server (:mod:`.servers`).

The web UI and the CLI both show these, from the read models here (times in seconds, as
everywhere in rota's API), and only turn them into bodies, pages or lines: a new read
of theirs goes here. The single-purpose reads (a record, a page of a set, the queues'
figures) are the client's own methods; what is read here combines several of them.
A flow's graph is read in :mod:`.flows`. Below the web and the CLI, beside the client:
nothing here imports either, or the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from rota.client import admin_reads
from rota.client.workflow import MISSING, GroupProgress, Related, pipelined, read_related
from rota.inspect import servers
from rota.inspect.members import MEMBER_STATES, MemberState, members_in_state
from rota.inspect.queues import QueuedJob, QueueView, queue_view, served_names
from rota.inspect.servers import *  # noqa: F403 (re-exported: its __all__ joins this one)
from rota.protocol.job import (
    JobRecord,
    field_int,
    reply_text,
)
from rota.redis.outage import guarded

if TYPE_CHECKING:
    from rota.client import Client
    from rota.client.shard import Shard

__all__ = [
    "CHILDREN_LIMIT",
    "FINAL_STATES",
    "FLOW_LIMIT",
    "MEMBER_STATES",
    "MISSING",
    "Edge",
    "FlowView",
    "GroupView",
    "JobView",
    "MemberState",
    "QueueView",
    "QueuedJob",
    "group_view",
    "job_view",
    "queue_view",
    "served_names",
    "unserved",
]
# The server's figures and the shards' reachability, read in rota.inspect.servers.
__all__ += servers.__all__

#: The most jobs a flow graph holds; a larger flow is cut, and says so.
FLOW_LIMIT: Final = 200
#: The most children read of a job (the first by id, then by enqueue time).
CHILDREN_LIMIT: Final = 500
#: States a job stays in: a view showing only these has nothing to refresh.
FINAL_STATES: Final = frozenset({"complete", "dead", "aborted", MISSING})


class JobView(msgspec.Struct, kw_only=True):
    """A job's record, its log lines, and the jobs it is tied to."""

    record: JobRecord
    logs: list[str]
    parents: list[Related]
    #: Those read (at most the limit asked for), in the order they were enqueued.
    children: list[Related]
    children_total: int
    #: The callback of the group the job is a member of.
    callback: Related | None
    #: The group it is a member or the callback of (None once expired).
    group_progress: GroupProgress | None


class GroupView(msgspec.Struct, kw_only=True):
    """A group's progress, its callback, a page of its members, and those that failed."""

    progress: GroupProgress
    then: Related | None
    offset: int
    limit: int
    members: list[Related]
    failed_members: list[Related]
    #: The members' state the page keeps (None: all), how many members are in it, and
    #: how many were read to count them (fewer than the group's: the count stopped).
    state: MemberState | None = None
    matching: int | None = None
    scanned: int | None = None


class Edge(msgspec.Struct, frozen=True):
    """A tie of a flow, parent to child: ``after``, or ``group`` (a member to its callback).
    The JSON API sends the two ends as ``from`` and ``to``."""

    parent: Annotated[str, Meta(description="the parent")] = msgspec.field(name="from")
    child: Annotated[str, Meta(description="the child")] = msgspec.field(name="to")
    kind: Annotated[
        Literal["after", "group"],
        Meta(description="after: enqueued after; group: a member and its group's callback"),
    ]


class FlowView(msgspec.Struct, kw_only=True):
    """Every job of a workflow reachable from one (at most ``limit``) and their ties."""

    id: str
    nodes: list[Related]
    unserved: Annotated[list[str], Meta(description="unfinished jobs' names no pool serves")]
    edges: list[Edge]
    limit: Annotated[int, Meta(description="the most jobs a flow holds")]
    truncated: Annotated[bool, Meta(description="some jobs of the flow were left out")]


async def unserved(client: Client, jobs: list[Related]) -> list[str]:
    """The names of those ``jobs`` not finished yet that no live pool serves: what they
    wait for, a pool that never comes unless someone starts one. Reads the pools only
    when some of the jobs are not finished."""
    names = {j.name for j in jobs if j.state not in FINAL_STATES and j.name}
    if not names:
        return []
    return sorted(names - await served_names(client))


@guarded
async def job_view(
    client: Client, job_id: str, children: int | None = CHILDREN_LIMIT
) -> JobView | None:
    """A job, its log and its ties, reading at most ``children`` of its children (None:
    all). Two round trips (three for a member of a group with a callback); None when
    there is no such job."""
    shard = await client.admin.shard_holding(job_id)
    h, raw_logs, raw_kids = await admin_reads.job_and_ties(shard, job_id)
    if not h:
        return None
    record = JobRecord.from_hash(job_id, h)
    kids = sorted(reply_text(i) for i in raw_kids or ())
    parents = list(dict.fromkeys(record.after))
    shown = kids if children is None else kids[:children]
    gid = record.group or record.waits_group
    rows = await admin_reads.related_rows(shard, parents + shown, gid)
    progress = GroupProgress.read(gid, pipelined(rows[-1])) if gid else None
    found = await _elsewhere(
        client, [read_related(i, row) for i, row in zip(parents + shown, rows, strict=False)]
    )
    order = {i: _enqueued(row) for i, row in zip(parents + shown, rows, strict=False)}
    callback = None
    if record.group and progress is not None and progress.then:
        (callback,) = await client.admin.related([progress.then])
    return JobView(
        record=record,
        logs=[reply_text(x) for x in raw_logs or ()],
        parents=found[: len(parents)],
        children=sorted(found[len(parents) :], key=lambda r: (order[r.id], r.id)),
        children_total=len(kids),
        callback=callback,
        group_progress=progress,
    )


async def _elsewhere(client: Client, found: list[Related]) -> list[Related]:
    """``found`` (read in one shard), those missing there read in the shard that holds
    them: a tie routed by a unique key, or with an id chosen by a producer, may live in
    another shard. Nothing more to read with one shard."""
    missing = [r.id for r in found if r.state == MISSING]
    if len(client.admin.shards) == 1 or not missing:
        return found
    again = {r.id: r for r in await client.admin.related(missing)}
    return [again.get(r.id, r) for r in found]


def _enqueued(row: Any) -> int:
    """When a related job was enqueued (ms), from its ``HMGET`` of ``RELATED_FIELDS``."""
    return field_int(row[2]) if row and not isinstance(row, Exception) else 0


@guarded
async def group_view(
    client: Client,
    group_id: str,
    offset: int = 0,
    limit: int = 25,
    state: MemberState | None = None,
) -> GroupView | None:
    """A group's progress, its callback, and a page of its members (those in ``state``
    only, see :func:`.members.members_in_state`), in two round trips (and the reads of
    its failed members when some failed, of all its members for a state); None when
    there is no such group (never enqueued, or expired 7 days after its last member
    finished)."""
    shard = admin_reads.group_shard(client, group_id)  # a group and its members share it
    raw, ids = await admin_reads.group_head(shard, group_id, offset, limit)
    progress = GroupProgress.read(group_id, raw)
    if progress is None:
        return None
    matching = scanned = None
    if state is not None:
        kept, matching, scanned = await members_in_state(shard, group_id, state, offset, limit)
        ids = [r.id for r in kept]
    wanted = ids + ([progress.then] if progress.then else [])
    rows = await admin_reads.related_rows(shard, wanted, None)  # none: no round trip
    found = [read_related(i, row) for i, row in zip(wanted, rows, strict=True)]
    return GroupView(
        progress=progress,
        then=found[-1] if progress.then else None,
        offset=offset,
        limit=limit,
        members=found[: len(ids)],
        failed_members=await _failed_members(shard, group_id) if progress.failed else [],
        state=state,
        matching=matching,
        scanned=scanned,
    )


#: The most members read to find the dead or aborted ones of a group, and the most listed.
_FAILED_SCAN: Final = 20_000
_FAILED_SHOWN: Final = 100


async def _failed_members(shard: Shard, group_id: str) -> list[Related]:
    """The members of a group that ended dead or aborted, wherever they are in its list
    (a page of members hid them past its end), read 500 at a time."""
    out: list[Related] = []
    for start in range(0, _FAILED_SCAN, 500):
        chunk = await shard.group_members(group_id, start, 500)
        rows = await admin_reads.related_rows(shard, chunk, None)
        out += [r for r in map(read_related, chunk, rows) if r.state in ("dead", "aborted")]
        if len(chunk) < 500 or len(out) >= _FAILED_SHOWN:
            break
    return out[:_FAILED_SHOWN]
