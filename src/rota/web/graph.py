"""Workflow graphs drawn on the server as SVG geometry: jobs in layers left to right by
depth (a job sits one layer right of its deepest parent), each a box coloured by its
state through a CSS class, parents joined to children by curves.

No edge passes behind a box. Boxes sit on a grid of rows shared by every column (a
short column is centred by whole rows), so the gaps between rows run across the whole
graph: an edge with a column between its ends (a layer of several columns, or a parent
more than one layer back) turns into the row gap nearest its ends in the free strip after
its parent's column, runs along it, and turns out of it in the strip before its child's.

The template turns the geometry into ``<rect>``, ``<text>`` and ``<path>`` elements
inside ``<a>`` links; no script is needed to see or follow them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["STATES", "layout"]

NODE_W: Final = 176
NODE_H: Final = 44
COL_GAP: Final = 64  # between layers, where the edges run
SUB_GAP: Final = 24  # between the columns of one wide layer, where edges turn
ROW_GAP: Final = 12
PAD: Final = 8
#: A layer with more jobs than this is drawn in several columns.
MAX_ROWS: Final = 10

#: Every state a node can show, in the legend's order.
STATES: Final = (
    *("waiting", "scheduled", "queued", "running", "retry"),
    *("complete", "dead", "aborted", "missing"),
)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _depths(ids: list[str], parents: dict[str, list[str]]) -> dict[str, int]:
    """Longest path from a job without parents (Kahn's order); a job on a cycle, which
    rota never builds but a hand-written record could, stays where it was reached."""
    children: dict[str, list[str]] = {i: [] for i in ids}
    missing = {i: len(parents[i]) for i in ids}
    for i in ids:
        for p in parents[i]:
            children[p].append(i)
    depth = dict.fromkeys(ids, 0)
    ready = [i for i in ids if missing[i] == 0]
    while ready:
        i = ready.pop(0)
        for c in children[i]:
            depth[c] = max(depth[c], depth[i] + 1)
            missing[c] -= 1
            if missing[c] == 0:
                ready.append(c)
    return depth


def layout(
    nodes: Sequence[dict[str, Any]], edges: Sequence[dict[str, Any]], focus: str | None = None
) -> dict[str, Any]:
    """Positions of ``nodes`` (``{id, name, state}``) and curves of ``edges``
    (``{from, to, kind}``) for an SVG of ``width`` x ``height``; ``focus`` is the job
    the page is about, drawn bold."""
    ids = [n["id"] for n in nodes]
    known = set(ids)
    parents: dict[str, list[str]] = {i: [] for i in ids}
    for e in edges:
        if e["from"] in known and e["to"] in known and e["from"] != e["to"]:
            parents[e["to"]].append(e["from"])
    layers = _layers(ids, parents)
    rows = min(MAX_ROWS, max((len(v) for v in layers.values()), default=1))
    height = 2 * PAD + rows * (NODE_H + ROW_GAP) - ROW_GAP
    boxes, x = _boxes(layers, rows, {n["id"]: n for n in nodes}, focus)
    width = max(x - COL_GAP + PAD, NODE_W + 2 * PAD)
    curves = _curves(edges, boxes, rows)
    present = {b["state"] for b in boxes.values()}
    return {
        "width": width,
        "height": height,
        "nodes": [boxes[i] for i in ids],
        "edges": curves,
        "legend": [s for s in STATES if s in present] + sorted(present - set(STATES)),
        "layers": len(layers),
    }


def _layers(ids: list[str], parents: dict[str, list[str]]) -> dict[int, list[str]]:
    """The jobs of each depth, in the order they are drawn from top to bottom."""
    depth = _depths(ids, parents)
    layers: dict[int, list[str]] = {}
    for i in ids:
        layers.setdefault(depth[i], []).append(i)
    # within a layer, a job goes near its parents (the mean of their rows), which
    # uncrosses most edges; ties keep the order the jobs were found in
    row: dict[str, float] = {}
    found = {i: n for n, i in enumerate(ids)}
    for d in sorted(layers):
        layer = layers[d]

        def place(i: str) -> tuple[float, int]:
            seen = [row[p] for p in parents[i] if p in row]
            return (sum(seen) / len(seen) if seen else math.inf, found[i])

        layer.sort(key=place)
        for n, i in enumerate(layer):
            row[i] = n
    return layers


def _boxes(
    layers: dict[int, list[str]], rows: int, by_id: dict[str, Any], focus: str | None
) -> tuple[dict[str, dict[str, Any]], float]:
    """The box of each job, a column per depth (more when a depth has more than
    ``MAX_ROWS`` jobs), and the x where the next column would start."""
    step_y = NODE_H + ROW_GAP
    boxes: dict[str, dict[str, Any]] = {}
    x = PAD
    for d in sorted(layers):
        layer = layers[d]
        columns = math.ceil(len(layer) / MAX_ROWS)
        for n, i in enumerate(layer):
            column, r = divmod(n, MAX_ROWS)
            in_column = min(MAX_ROWS, len(layer) - column * MAX_ROWS)
            top = PAD + (rows - in_column) // 2 * step_y  # centred by whole rows
            node = by_id[i]
            name = node.get("name") or ""
            state = node.get("state") or "unknown"
            boxes[i] = {
                "id": i,
                "name": name,
                "state": state,
                "x": x + column * (NODE_W + SUB_GAP),
                "y": round(top + r * step_y, 1),
                "w": NODE_W,
                "h": NODE_H,
                "label": _short(name or "(no record)", 22),
                "sub": f"{state} · {_short(i, 12)}",
                "title": f"{name or '(no record)'} {i}: {state}",
                "focus": i == focus,
            }
        x += columns * NODE_W + (columns - 1) * SUB_GAP + COL_GAP
    return boxes, x


def _lane(y1: float, y2: float, rows: int) -> float:
    """The y of the gap between rows (or above the first, or below the last) nearest to
    both ``y1`` and ``y2``: no box of any column reaches it."""
    step = NODE_H + ROW_GAP
    lanes = [PAD + j * step - ROW_GAP / 2 for j in range(rows + 1)]
    return min(lanes, key=lambda y: (abs(y - y1) + abs(y - y2), y))


def _curves(
    edges: Sequence[dict[str, Any]], boxes: dict[str, dict[str, Any]], rows: int
) -> list[dict[str, Any]]:
    """An SVG path per edge between two drawn jobs, from the right of one to the left
    of the other, around the boxes of the columns between them."""
    columns = sorted({b["x"] for b in boxes.values()})
    curves = []
    for e in edges:
        a, b = boxes.get(e["from"]), boxes.get(e["to"])
        if a is None or b is None:
            continue
        x1, y1 = a["x"] + NODE_W, a["y"] + NODE_H / 2
        x2, y2 = b["x"], b["y"] + NODE_H / 2
        between = [x for x in columns if x1 <= x and x + NODE_W <= x2]
        if between:
            out, into = between[0] - x1, x2 - (between[-1] + NODE_W)
            y = _lane(y1, y2, rows)
            d = (
                f"M{x1:g},{y1:g} C{x1 + out / 2:g},{y1:g} {x1 + out / 2:g},{y:g} {x1 + out:g},{y:g}"
                f" L{x2 - into:g},{y:g}"
                f" C{x2 - into / 2:g},{y:g} {x2 - into / 2:g},{y2:g} {x2:g},{y2:g}"
            )
        else:
            bend = max(24.0, abs(x2 - x1) / 2)
            d = f"M{x1:g},{y1:g} C{x1 + bend:g},{y1:g} {x2 - bend:g},{y2:g} {x2:g},{y2:g}"
        curves.append({"d": d, "kind": e.get("kind", "after"), "from": e["from"], "to": e["to"]})
    return curves
