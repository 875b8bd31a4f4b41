"""The jobs a job is tied to, as the bodies of :mod:`rota.web.bodies`: its parents and
children, its group, and the whole flow it belongs to, read in as few round trips as the
graph allows.

Split from :mod:`rota.web.views` so that the page data for single jobs and sets stays
short; both are read through :class:`rota.client.Client`.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from rota.client import Client
from rota.protocol.job import JobRecord, field_int, field_text, reply_text
from rota.web import bodies as b
from rota.workflow import (
    MISSING,
    RELATED_FIELDS,
    GroupProgress,
    Related,
    pipelined,
    read_related,
)

__all__ = [
    "CHILDREN_LIMIT",
    "FINAL_STATES",
    "FLOW_LIMIT",
    "MISSING",
    "PRETTY_LIMIT",
    "flow",
    "group_detail",
    "job_detail",
    "served_names",
    "unserved",
]

#: The most jobs a flow graph holds; a larger flow is cut, and says so.
FLOW_LIMIT: Final = 200
#: The most children listed on a job's page (the first by id, then by enqueue time).
CHILDREN_LIMIT: Final = 500
#: States a job stays in: a page showing only these has nothing to refresh.
FINAL_STATES: Final = frozenset({"complete", "dead", "aborted", MISSING})


#: The longest indented rendering of a value sent: an 18 KB value nested 900 deep
#: indents to 16 MB. A value past it is shown as stored (and cut on the page).
PRETTY_LIMIT: Final = 64 * 1024
#: Nesting past this depth is not indented: each level adds two spaces to every line.
_PRETTY_DEPTH: Final = 16


def _pretty(text: str | None) -> tuple[Any, str | None]:
    """Decoded JSON and an indented rendering, None when that would pass
    :data:`PRETTY_LIMIT`; the text itself when it is not JSON (or nests deeper than
    the decoder goes)."""
    if text is None:
        return None, None
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None, text
    if len(text) > PRETTY_LIMIT // 2 or _deeper(value, _PRETTY_DEPTH):
        return value, None
    pretty = msgspec.json.format(text, indent=2)
    return value, pretty if len(pretty) <= PRETTY_LIMIT else None


def _deeper(value: Any, depth: int) -> bool:
    """Whether ``value`` nests more than ``depth`` arrays or objects deep (no recursion:
    a value may nest as deep as the decoder allows)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if level >= depth:
                return True
            stack += [(x, level + 1) for x in item if isinstance(x, list | dict)]
    return False


async def served_names(client: Client) -> set[str]:
    """The job names some live pool serves (its jobs wait for one while none does)."""
    return {name for pool in await client.pools() for name in pool.jobs}


async def unserved(client: Client, jobs: list[Related]) -> list[str]:
    """The names of those ``jobs`` not finished yet that no live pool serves: what they
    wait for, a pool that never comes unless someone starts one. Reads the pools only
    when some of the jobs are not finished."""
    names = {j.name for j in jobs if j.state not in FINAL_STATES and j.name}
    if not names:
        return []
    return sorted(names - await served_names(client))


def _progress(text: str | None) -> b.JobProgress | None:
    if not text:
        return None
    head, _, message = text.partition(" ")
    try:
        percent = float(head)
    except ValueError:
        return b.JobProgress(None, text)
    return b.JobProgress(percent, message)


def _enqueued(row: Any) -> int:
    """When a related job was enqueued (ms), from its ``HMGET`` of ``RELATED_FIELDS``."""
    return field_int(row[2]) if row and not isinstance(row, Exception) else 0


def _group_progress(group_id: str, raw: Any) -> GroupProgress | None:
    """What ``client.group_progress`` returns, from an ``HMGET`` of the group's hash
    read in a pipeline; None when there is no such group."""
    return GroupProgress.read(group_id, pipelined(raw))


async def job_detail(client: Client, job_id: str) -> dict[str, Any] | None:
    """Everything stored about a job, its log lines, and the jobs it is tied to: its
    parents and children as ``{id, name, state}``, and the group it is a member or the
    callback of. Two round trips (three for a member of a group with a callback);
    None when there is no such job.

    The record's fields, then :class:`~rota.web.bodies.JobDetail`'s (replacing the
    times and ``args``, ``result`` and ``progress``): a record's new field is sent, and
    documented, without a change here."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    pipe.hgetall(k.job(job_id))
    pipe.lrange(k.joblog(job_id), 0, -1)
    pipe.smembers(k.children(job_id))
    h, raw_logs, raw_kids = (pipelined(v) for v in await pipe.execute(raise_on_error=False))
    if not h:
        return None
    record = JobRecord.from_hash(job_id, h)
    kids = sorted(reply_text(i) for i in raw_kids or ())
    parents, children, progress = await _ties(client, record, kids[:CHILDREN_LIMIT])
    callback = None
    if record.group and progress is not None and progress.then:
        (callback,) = await client.related([progress.then])
    args, args_text = _pretty(record.args)
    result, result_text = _pretty(record.result)
    detail = b.mirror(  # the record's times, in ms
        b.JobDetail,
        record,
        args=args,
        args_raw=record.args,
        args_pretty=args_text,
        result=result,
        result_raw=record.result,
        result_pretty=result_text,
        progress=_progress(record.progress),
        progress_raw=record.progress,
        logs=[reply_text(x) for x in raw_logs or ()],
        parents=parents,
        children=children,
        children_total=len(kids),
        unserved=await unserved(client, parents),
        callback=callback,
        group_progress=None if progress is None else b.mirror(b.GroupProgress, progress),
    )
    return {**msgspec.structs.asdict(record), **msgspec.structs.asdict(detail)}


async def _ties(
    client: Client, record: JobRecord, shown: list[str]
) -> tuple[list[Related], list[Related], GroupProgress | None]:
    """A job's parents and (``shown``) children as ``{id, name, state}``, the children
    in the order they were enqueued, and its group's progress: one round trip."""
    parents = list(dict.fromkeys(record.after))
    gid = record.group or record.waits_group
    pipe = client.redis.pipeline(transaction=False)
    for i in parents + shown:
        pipe.hmget(client.keys.job(i), *RELATED_FIELDS)
    if gid:
        pipe.hmget(client.keys.group(gid), *GroupProgress.FIELDS)
    rows = await pipe.execute(raise_on_error=False)
    progress = _group_progress(gid, rows[-1]) if gid else None
    found = [read_related(i, row) for i, row in zip(parents + shown, rows, strict=False)]
    order = {i: _enqueued(row) for i, row in zip(parents + shown, rows, strict=False)}
    children = sorted(found[len(parents) :], key=lambda r: (order[r.id], r.id))
    return found[: len(parents)], children, progress


async def group_detail(
    client: Client, group_id: str, offset: int = 0, limit: int = 25
) -> b.Group | None:
    """A group's progress, its callback, and a page of its members as
    ``{id, name, state}``, in two round trips; None when there is no such group (never
    enqueued, or expired 7 days after its last member finished)."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    pipe.hmget(k.group(group_id), *GroupProgress.FIELDS)
    pipe.lrange(k.group_members(group_id), offset, offset + limit - 1)
    raw, members = await pipe.execute(raise_on_error=False)
    progress = _group_progress(group_id, raw)
    if progress is None:
        return None
    ids = [reply_text(m) for m in pipelined(members) or ()]
    found = await client.related(ids + ([progress.then] if progress.then else []))
    failed = await _failed_members(client, group_id) if progress.failed else []
    return b.mirror(
        b.Group,
        progress,
        then=found[-1] if progress.then else None,
        offset=offset,
        limit=limit,
        members=found[: len(ids)],
        failed_members=failed,
    )


#: The most members read to find the dead or aborted ones of a group, and the most listed.
_FAILED_SCAN: Final = 20_000
_FAILED_SHOWN: Final = 100


async def _failed_members(client: Client, group_id: str) -> list[Related]:
    """The members of a group that ended dead or aborted, wherever they are in its list
    (a page of members hid them past its end), read 500 at a time."""
    out: list[Related] = []
    key = client.keys.group_members(group_id)
    for start in range(0, _FAILED_SCAN, 500):
        chunk = [reply_text(m) for m in await client.redis.lrange(key, start, start + 499)]
        out += [r for r in await client.related(chunk) if r.state in ("dead", "aborted")]
        if len(chunk) < 500 or len(out) >= _FAILED_SHOWN:
            break
    return out[:_FAILED_SHOWN]


async def flow(client: Client, job_id: str, limit: int = FLOW_LIMIT) -> b.Flow | None:
    """The graph of the workflow ``job_id`` belongs to: every job reachable from it by
    following parents (``after``, and a callback's group members) and children (the
    jobs enqueued after a job, and a member's group callback), nearest first, at most
    ``limit`` jobs (``truncated`` says when some were left out).

    Nodes are ``{id, name, state}``, edges ``{from, to, kind}`` (parent to child;
    ``kind`` is ``after`` or ``group``). One round trip per level of the graph, and one
    more for the levels that meet a group; None when ``job_id`` has no record."""
    nodes: dict[str, Related] = {}
    edges: dict[tuple[str, str], b.EdgeKind] = {}
    thens: dict[str, str | None] = {}  # group -> its callback
    members: dict[str, list[str]] = {}  # group -> its members (at most ``limit``)
    frontier, planned = [job_id], {job_id}
    truncated = False
    while frontier:
        links = await _flow_level(client, frontier, nodes)
        if nodes[job_id].state == MISSING:
            return None
        await _flow_groups(client, links, thens, members, limit)
        following: list[str] = []
        for i, link in links.items():
            for other in _flow_edges(i, link, thens, members, edges):
                if other in planned:
                    continue
                if len(planned) >= limit:
                    truncated = True
                    continue
                planned.add(other)
                following.append(other)
        frontier = following
    return b.Flow(
        id=job_id,
        nodes=list(nodes.values()),
        unserved=await unserved(client, list(nodes.values())),
        edges=[
            b.Edge(from_=parent, to=child, kind=kind)
            for (parent, child), kind in edges.items()
            if parent in nodes and child in nodes
        ],
        limit=limit,
        truncated=truncated,
    )


#: What ties a job to others: its parents, children, group and the group it waits for.
_Links = tuple[list[str], list[str], str | None, str | None]


async def _flow_level(
    client: Client, frontier: list[str], nodes: dict[str, Related]
) -> dict[str, _Links]:
    """Read one level of the graph: each job's node (into ``nodes``) and its links."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    for i in frontier:
        pipe.hmget(k.job(i), "name", "state", "after", "group", "waits_group")
        pipe.smembers(k.children(i))
    rows = await pipe.execute(raise_on_error=False)
    links: dict[str, _Links] = {}
    for n, i in enumerate(frontier):
        node = nodes[i] = read_related(i, rows[2 * n])
        if node.state == MISSING:
            continue
        row = rows[2 * n]  # a record: read_related found one
        after = (field_text(row[2]) or "").split()
        kids = sorted(reply_text(c) for c in pipelined(rows[2 * n + 1]) or ())
        links[i] = (after, kids, field_text(row[3]) or None, field_text(row[4]) or None)
    return links


async def _flow_groups(
    client: Client,
    links: dict[str, _Links],
    thens: dict[str, str | None],
    members: dict[str, list[str]],
    limit: int,
) -> None:
    """Read the callbacks and members of the groups these links meet for the first
    time, in one round trip (none when there are none)."""
    wanted_then = {g for *_, g, _ in links.values() if g and g not in thens}
    wanted_members = {w for *_, w in links.values() if w and w not in members}
    if not (wanted_then or wanted_members):
        return
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    for g in sorted(wanted_then):
        pipe.hget(k.group(g), "then")
    for g in sorted(wanted_members):
        pipe.lrange(k.group_members(g), 0, limit - 1)
    answers = iter(await pipe.execute(raise_on_error=False))
    for g in sorted(wanted_then):
        thens[g] = field_text(pipelined(next(answers))) or None
    for g in sorted(wanted_members):
        members[g] = [reply_text(m) for m in pipelined(next(answers)) or ()]


def _flow_edges(
    i: str,
    link: _Links,
    thens: dict[str, str | None],
    members: dict[str, list[str]],
    edges: dict[tuple[str, str], b.EdgeKind],
) -> list[str]:
    """Add the edges of job ``i`` to ``edges``; the jobs at their other ends."""
    after, kids, group, waits = link
    ups: list[tuple[str, b.EdgeKind]] = [(p, "after") for p in after]
    ups += [(m, "group") for m in members.get(waits or "", [])]
    then = thens.get(group or "")
    downs: list[tuple[str, b.EdgeKind]] = [(c, "after") for c in kids]
    downs += [(then, "group")] if then else []
    for p, kind in ups:
        edges.setdefault((p, i), kind)
    for c, kind in downs:
        edges.setdefault((i, c), kind)
    return [other for other, _ in ups + downs]
