"""Workflows: the graph of the one a job belongs to, and a group's progress, callback and
members, each drawn on the server as SVG geometry (:mod:`rota.web.graph`)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Final

import msgspec
from starlette.requests import Request

from rota import inspect
from rota.client.workflow import Related
from rota.inspect import FINAL_STATES, MISSING, FlowView
from rota.inspect.flows import flow_view
from rota.inspect.members import MEMBER_STATES, MemberState, member_state
from rota.web.base import client_of
from rota.web.declare import REFRESH, Choice, Number, Routes, found, mirror, pages, said
from rota.web.graph import STATES, layout
from rota.web.jobs import GroupProgress

__all__ = ["Flow", "Group", "group_state", "routes"]

routes = Routes()
_OFFSET: Final = Number("offset", 0, 0, 10**9)
_LIMIT: Final = Number("limit", 100, 1, 1000, page=25)
_MEMBERS: Final = Choice(
    "state", ("all", *MEMBER_STATES), "keep the members in this state (default all)"
)
#: What the group page says of a callback that will not run, or ran and failed.
_CALLBACK_ENDED: Final = {
    "dead": "the callback is dead",
    "aborted": "the callback was aborted",
    MISSING: "the callback's record is gone",
}


class Flow(FlowView, kw_only=True):
    """The graph of the workflow a job belongs to."""


class Group(GroupProgress, frozen=True):
    """A group's progress, its callback (the job, where the progress has its id), and a
    page of its members."""

    then: Annotated[Related | None, said("the callback")]  # type: ignore[assignment]
    offset: int
    limit: int
    members: list[Related]
    failed_members: Annotated[
        list[Related], said("members that ended dead or aborted, wherever they are (at most 100)")
    ] = msgspec.field(default_factory=list)
    state: Annotated[MemberState | None, said("the members' state the page keeps (none: all)")] = (
        None
    )
    matching: Annotated[int | None, said("members in that state")] = None
    scanned: Annotated[
        int | None, said("members read to find them: fewer than total when it stopped")
    ] = None


def _counts(nodes: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """How many jobs are in each state, in the legend's order."""
    counts = Counter(n["state"] for n in nodes)
    order = {s: i for i, s in enumerate(STATES)}
    return sorted(counts.items(), key=lambda c: (order.get(c[0], len(order)), c[0]))


def _settled(nodes: list[dict[str, Any]]) -> bool:
    return all(n["state"] in FINAL_STATES for n in nodes)


async def _graph(request: Request, data: Any) -> dict[str, Any]:
    return {
        "g": layout(data["nodes"], data["edges"], focus=request.path_params["job_id"]),
        "counts": _counts(data["nodes"]),
        "refresh": 0 if _settled(data["nodes"]) else REFRESH,
    }


@routes.page("/flows/{job_id}", "flow.html", _graph)
@routes.api("/api/flows/{job_id}", "flow", Flow)
async def flow(request: Request) -> Flow:
    """The graph of the workflow a job belongs to (at most 200 jobs)."""
    job_id = request.path_params["job_id"]
    view = found(request, await flow_view(client_of(request), job_id), "job", job_id)
    return mirror(Flow, view)


def group_state(data: dict[str, Any]) -> str:
    """The group page's state: how far its members are, then its callback when that
    ended without running to completion (it never says "running" beside a dead or
    aborted callback)."""
    failed, then = data["failed"], data["then"]
    ended = _CALLBACK_ENDED.get(then["state"]) if then is not None else None
    lost = f", {failed} dead or aborted" if failed else ""
    if data["sent"] < data["total"]:
        members = "incomplete: members missing"
    elif data["finished"]:
        members = "finished" + lost
    elif failed or ended:
        members = "members still to run" + (lost + " already" if failed else "")
    else:
        return "running"
    if ended:
        return f"{members}; {ended}" + ("" if data["finished"] else ": it will not run")
    if failed and not data["finished"] and data["sent"] >= data["total"]:
        return members + ": the callback will not run"
    return members


async def _members(request: Request, data: Any) -> dict[str, Any]:
    nodes = list(data["members"])
    edges = []
    if data["then"] is not None:
        nodes.append(data["then"])
        edges = [{"from": m["id"], "to": data["then"]["id"], "kind": "group"} for m in nodes[:-1]]
    total, kept, offset = max(1, data["total"]), data["state"], data["offset"]
    listed = data["total"] if kept is None else data["matching"]
    return {
        "g": layout(nodes, edges),
        "bar": {
            "done": round(1000 * data["done"] / total, 1),
            "failed": round(1000 * data["failed"] / total, 1),
        },
        "state": group_state(data),
        "refresh": 0 if data["finished"] and _settled(nodes) else REFRESH,
        "filters": ["all", *MEMBER_STATES],
        "shown": kept or "all",
        **pages(offset, 25, listed),
    }


@routes.page("/groups/{group_id}", "group.html", _members)
@routes.api("/api/groups/{group_id}", "group", Group, params=(_OFFSET, _LIMIT, _MEMBERS))
async def group(request: Request) -> Group:
    """A group's progress, its callback, and a page of its members (those in a state)."""
    group_id = request.path_params["group_id"]
    offset, limit = _OFFSET.read(request), _LIMIT.read(request)
    state = member_state(_MEMBERS.read(request))  # None: all
    view = await inspect.group_view(client_of(request), group_id, offset, limit, state)
    view = found(request, view, "group", group_id, " (never enqueued, or expired)")
    page = ("then", "members", "failed_members", "state", "matching", "scanned")
    return mirror(
        Group, view.progress, offset=offset, limit=limit, **{f: getattr(view, f) for f in page}
    )
