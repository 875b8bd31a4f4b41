"""The graph of a workflow: every job reachable from one by its ties, read one level of
the graph per round trip."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from rota.client.rules import gather
from rota.client.workflow import Related, pipelined, read_related
from rota.inspect import FLOW_LIMIT, MISSING, Edge, FlowView, group_part, unserved
from rota.protocol.job import field_text, reply_text
from rota.protocol.shards import shard_of
from rota.redis.outage import guarded

if TYPE_CHECKING:
    from rota.client import Client, Shard

__all__ = ["flow_view"]

#: What ties a job to others: its parents, children, group and the group it waits for.
_Links = tuple[list[str], list[str], str | None, str | None]


@guarded
async def flow_view(client: Client, job_id: str, limit: int = FLOW_LIMIT) -> FlowView | None:
    """The graph of the workflow ``job_id`` belongs to: every job reachable from it by
    following parents (``after``, and a callback's group members) and children (the
    jobs enqueued after a job, and a member's group callback), nearest first, at most
    ``limit`` jobs (``truncated`` says when some were left out).

    One round trip per level of the graph, and one more for the levels that meet a
    group; None when ``job_id`` has no record."""
    nodes: dict[str, Related] = {}
    edges: dict[tuple[str, str], Edge] = {}
    thens: dict[str, str | None] = {}  # group -> its callback
    members: dict[str, list[str]] = {}  # group -> its members (at most ``limit``)
    frontier, planned = [job_id], {job_id}
    truncated = False
    while frontier:
        links = await _level(client, frontier, nodes)
        if nodes[job_id].state == MISSING:
            return None
        await _groups(client, links, thens, members, limit)
        following: list[str] = []
        for i, link in links.items():
            for other in _edges(i, link, thens, members, edges):
                if other in planned:
                    continue
                if len(planned) >= limit:
                    truncated = True
                    continue
                planned.add(other)
                following.append(other)
        frontier = following
    return FlowView(
        id=job_id,
        nodes=list(nodes.values()),
        edges=[e for e in edges.values() if e.parent in nodes and e.child in nodes],
        unserved=await unserved(client, list(nodes.values())),
        limit=limit,
        truncated=truncated,
    )


async def _level(
    client: Client, frontier: list[str], nodes: dict[str, Related]
) -> dict[str, _Links]:
    """Read one level of the graph: each job's node (into ``nodes``) and its links."""
    rows = await _rows(client, frontier)
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


async def _rows(client: Client, ids: list[str]) -> list[Any]:
    """Each job's fields and children, two rows a job: over several shards, read in the
    shard each id names (a pipeline each, at once), then in the shard that holds those
    not found there (an id a producer chose)."""
    if len(client.admin.shards) == 1:
        return await _shard_rows(client.admin.shards[0], ids)
    k = len(client.admin.shards)
    home = {i: client.admin.shards[shard_of(i, k)] for i in ids}
    got: dict[str, tuple[Any, Any]] = {}
    parts = list(dict.fromkeys(home.values()))
    each = await gather(
        [functools.partial(_shard_rows, p, [i for i in ids if home[i] is p]) for p in parts]
    )
    for p, rows in zip(parts, each, strict=True):
        mine = [i for i in ids if home[i] is p]
        got.update({i: (rows[2 * n], rows[2 * n + 1]) for n, i in enumerate(mine)})
    for i in ids:
        if read_related(i, got[i][0]).state == MISSING:
            part = await client.admin.shard_holding(i)
            if part is not home[i]:
                row, kids = await _shard_rows(part, [i])
                got[i] = (row, kids)
    return [row for i in ids for row in got[i]]


async def _shard_rows(client: Shard, ids: list[str]) -> list[Any]:
    """:func:`_rows` of one shard."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(k.job(i), "name", "state", "after", "group", "waits_group")
        pipe.smembers(k.children(i))
    return list(await pipe.execute(raise_on_error=False))


async def _groups(
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
    parts = list(dict.fromkeys(group_part(client, g) for g in wanted_then | wanted_members))
    each = await gather(
        [
            functools.partial(
                _shard_groups,
                part,
                sorted(g for g in wanted_then if group_part(client, g) is part),
                sorted(g for g in wanted_members if group_part(client, g) is part),
                limit,
            )
            for part in parts
        ]
    )
    for found_thens, found_members in each:
        thens.update(found_thens)
        members.update(found_members)


async def _shard_groups(
    client: Shard, wanted_then: list[str], wanted_members: list[str], limit: int
) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """The callbacks and members of groups of one shard, in one round trip."""
    k = client.keys
    pipe = client.redis.pipeline(transaction=False)
    for g in wanted_then:
        pipe.hget(k.group(g), "then")
    for g in wanted_members:
        pipe.lrange(k.group_members(g), 0, limit - 1)
    answers = iter(await pipe.execute(raise_on_error=False))
    thens = {g: field_text(pipelined(next(answers))) or None for g in wanted_then}
    members = {g: [reply_text(m) for m in pipelined(next(answers)) or ()] for g in wanted_members}
    return thens, members


def _edges(
    i: str,
    link: _Links,
    thens: dict[str, str | None],
    members: dict[str, list[str]],
    edges: dict[tuple[str, str], Edge],
) -> list[str]:
    """Add the edges of job ``i`` to ``edges``; the jobs at their other ends."""
    after, kids, group, waits = link
    ups = [Edge(p, i, "after") for p in after]
    ups += [Edge(m, i, "group") for m in members.get(waits or "", [])]
    then = thens.get(group or "")
    downs = [Edge(i, c, "after") for c in kids]
    downs += [Edge(i, then, "group")] if then else []
    for e in ups + downs:
        edges.setdefault((e.parent, e.child), e)
    return [e.parent for e in ups] + [e.child for e in downs]
