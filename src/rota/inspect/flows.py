"""The graph of a workflow: every job reachable from one by its ties, read one level of
the graph per round trip."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from rota.client import admin_reads
from rota.client.rules import gather
from rota.client.workflow import Related, pipelined, read_related
from rota.inspect import FLOW_LIMIT, MISSING, Edge, FlowView, unserved
from rota.protocol.job import field_text, reply_text
from rota.redis.outage import guarded

if TYPE_CHECKING:
    from rota.client import Client

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
    rows = await admin_reads.flow_rows(client, frontier)
    links: dict[str, _Links] = {}
    for i, (row, raw_kids) in zip(frontier, rows, strict=True):
        node = nodes[i] = read_related(i, row)
        if node.state == MISSING:
            continue
        after = (field_text(row[2]) or "").split()  # a record: read_related found one
        kids = sorted(reply_text(c) for c in pipelined(raw_kids) or ())
        links[i] = (after, kids, field_text(row[3]) or None, field_text(row[4]) or None)
    return links


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
    home = {g: admin_reads.group_shard(client, g) for g in wanted_then | wanted_members}
    each = await gather(
        [
            functools.partial(
                admin_reads.group_links,
                shard,
                sorted(g for g in wanted_then if home[g] is shard),
                sorted(g for g in wanted_members if home[g] is shard),
                limit,
            )
            for shard in dict.fromkeys(home.values())
        ]
    )
    for found_thens, found_members in each:
        thens.update(found_thens)
        members.update(found_members)


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
