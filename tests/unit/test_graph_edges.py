"""The flow page's layout puts each job right of its parents, and no edge of a workflow
graph passes behind a box: an edge with columns between its ends (a wide layer's, or a
skipped layer's) runs in a gap between rows."""

from __future__ import annotations

import re
from typing import Any

from rota.web.graph import layout


def _steps(ids: str) -> list[dict[str, Any]]:
    """One completed job per letter of ``ids``."""
    return [{"id": i, "name": "step", "state": "complete"} for i in ids]


def _edges(pairs: str) -> list[dict[str, Any]]:
    """``"ab bd"``: the edges a -> b and b -> d."""
    return [{"from": p[0], "to": p[1]} for p in pairs.split()]


def test_layout_puts_each_job_right_of_its_parents() -> None:
    nodes = _steps("abcd")
    g = layout(nodes, _edges("ab ac bd cd"), focus="a")
    x = {n["id"]: n["x"] for n in g["nodes"]}
    assert x["a"] < x["b"] == x["c"] < x["d"]
    assert g["layers"] == 3 and len(g["edges"]) == 4
    assert [n["id"] for n in g["nodes"] if n["focus"]] == ["a"]
    wide = layout([{"id": str(i), "name": "", "state": "queued"} for i in range(25)], [])
    assert len({n["x"] for n in wide["nodes"]}) == 3  # one layer in columns of 10
    looped = layout(nodes[:2], _edges("ab ba"))
    assert len(looped["nodes"]) == 2  # a cycle (never built by rota) is still drawn


def _points(d: str) -> list[tuple[float, float]]:
    """Points along an SVG path of absolute M, L and C commands, 40 per segment."""
    tokens = re.findall(r"[MLC]|-?[\d.]+", d)
    out: list[tuple[float, float]] = []
    at = (0.0, 0.0)
    i = 0
    while i < len(tokens):
        cmd = tokens[i]
        i += 1
        n = {"M": 1, "L": 1, "C": 3}[cmd]
        pts = [(float(tokens[i + 2 * k]), float(tokens[i + 2 * k + 1])) for k in range(n)]
        i += 2 * n
        if cmd == "C":
            p0, (p1, p2, p3) = at, pts
            for s in range(41):
                t = s / 40
                u = 1 - t
                out.append(
                    (
                        u**3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t**3 * p3[0],
                        u**3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t**3 * p3[1],
                    )
                )
        elif cmd == "L":
            for s in range(41):
                t = s / 40
                out.append((at[0] + (pts[0][0] - at[0]) * t, at[1] + (pts[0][1] - at[1]) * t))
        at = pts[-1]
    return out


def _crossings(g: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(edge's parent, edge's child, box) for each box an edge passes behind."""
    out = []
    for e in g["edges"]:
        for n in g["nodes"]:
            inside = [
                p
                for p in _points(e["d"])
                if n["x"] + 1 < p[0] < n["x"] + n["w"] - 1
                and n["y"] + 1 < p[1] < n["y"] + n["h"] - 1
            ]
            if inside:
                out.append((e["from"], e["to"], n["id"]))
    return out


def test_a_groups_members_in_columns_join_the_callback_between_the_boxes() -> None:
    members = [{"id": f"m{i}", "name": "part", "state": "complete"} for i in range(25)]
    nodes = [*members, {"id": "cb", "name": "collect", "state": "waiting"}]
    edges = [{"from": m["id"], "to": "cb", "kind": "group"} for m in members]
    g = layout(nodes, edges)
    assert len({n["x"] for n in g["nodes"]}) == 4  # three columns of members, the callback
    assert len(g["edges"]) == 25
    assert _crossings(g) == []
    ends = {(e["from"], e["d"].split()[0]) for e in g["edges"]}
    boxes = {n["id"]: n for n in g["nodes"]}
    for member, start in ends:  # each edge still leaves its own member's box
        x, y = (float(v) for v in start[1:].split(","))
        assert (x, y) == (boxes[member]["x"] + boxes[member]["w"], boxes[member]["y"] + 22)


def test_an_edge_that_skips_a_layer_goes_around_its_boxes() -> None:
    # a -> b -> c -> d (and two more such chains) and a -> d: the edge a -> d passes the
    # layers of b and c, level with their middle boxes
    g = layout(_steps("abcdefgh"), _edges("ab bc cd ad ae ef fd ag gh hd"))
    assert g["layers"] == 4
    assert _crossings(g) == []
