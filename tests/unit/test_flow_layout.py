"""The flow page's layout puts each job right of its parents."""

from __future__ import annotations

from rota.web.graph import layout


def test_layout_puts_each_job_right_of_its_parents() -> None:
    nodes = [{"id": i, "name": "step", "state": "complete"} for i in "abcd"]
    edges = [
        {"from": "a", "to": "b"},
        {"from": "a", "to": "c"},
        {"from": "b", "to": "d"},
        {"from": "c", "to": "d"},
    ]
    g = layout(nodes, edges, focus="a")
    x = {n["id"]: n["x"] for n in g["nodes"]}
    assert x["a"] < x["b"] == x["c"] < x["d"]
    assert g["layers"] == 3 and len(g["edges"]) == 4
    assert [n["id"] for n in g["nodes"] if n["focus"]] == ["a"]
    wide = layout([{"id": str(i), "name": "", "state": "queued"} for i in range(25)], [])
    assert len({n["x"] for n in wide["nodes"]}) == 3  # one layer in columns of 10
    looped = layout(nodes[:2], [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}])
    assert len(looped["nodes"]) == 2  # a cycle (never built by rota) is still drawn
