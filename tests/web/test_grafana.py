"""The Grafana dashboard in config/ asks only for what /metrics exports.

Every metric an expression names must be a sample the web UI serves, and every label it
groups or filters by must be one that metric carries; a renamed metric or label fails
here instead of leaving an empty panel on an operator's screen.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rota import Client
from tests.web.live import Seeded

DASHBOARD = Path(__file__).parents[2] / "src" / "rota" / "web" / "grafana-dashboard.json"
_METRIC = re.compile(r"\brota_[a-z_]+\b")
_BY = re.compile(r"\bby \(([^)]*)\)")
_MATCHER = re.compile(r"(rota_[a-z_]+)\{([^}]*)\}")


def _expressions(dashboard: dict[str, Any]) -> list[str]:
    out = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            out.append(var["definition"])
    return out


async def test_every_expression_names_an_exported_metric(
    http: httpx.AsyncClient, client: Client, seeded: Seeded
) -> None:
    await client.enqueue("mail", 1)
    text = (await http.get("/metrics")).text
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = _expressions(dashboard)
    assert len(exprs) >= 15
    used = set()
    for expr in exprs:
        names = _METRIC.findall(expr)
        assert names, f"no rota metric in {expr!r}"
        for name in names:
            assert name in labels, f"{expr!r} names {name}, which /metrics does not export"
            used.add(name)
        for name, matchers in _MATCHER.findall(expr):
            for label in re.findall(r"([a-z_]+)\s*=~?", matchers):
                assert label in labels[name], f"{name} has no label {label} ({expr!r})"
        for group in _BY.findall(expr):
            for label in (x.strip() for x in group.split(",")):
                assert all(label in labels[n] for n in names), f"{label} missing in {expr!r}"
    # the figures the dashboard is for: queues, throughput, failures, latency, pools
    assert {
        "rota_queue_size",
        "rota_jobs_processed_total",
        "rota_jobs_failed_total",
        "rota_queue_latency_seconds",
        "rota_pools",
    } <= used
    assert all("${datasource}" in json.dumps(p["datasource"]) for p in dashboard["panels"])
