"""A job name's run times on the web: ``/api/queues/{name}/run-times`` (the hour or the
day: count, p50/p95/p99, the slowest bucket and the histogram), its entry in the OpenAPI
document, and its refusals."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rota import Client
from rota.protocol.run_times import BOUNDS, BUCKETS
from tests.test_run_times import finish_with_run_times


async def test_a_name_has_its_run_times(http: httpx.AsyncClient, client: Client) -> None:
    await finish_with_run_times(client, "mail", [40] * 10 + [200] * 9 + [3000], now_ms=_now())

    reply = await http.get("/api/queues/mail/run-times")
    assert reply.status_code == 200
    data = reply.json()
    assert {k: data[k] for k in ("name", "window", "count", "p50_ms", "p95_ms", "p99_ms")} == {
        "name": "mail",
        "window": "hour",
        "count": 20,
        "p50_ms": 58,
        "p95_ms": 292,
        "p99_ms": 3326,
    }
    assert data["max_ms"] == 3326
    assert len(data["buckets"]) == BUCKETS
    assert [b["le_ms"] for b in data["buckets"]] == [*BOUNDS, None]
    assert {b["le_ms"]: b["count"] for b in data["buckets"] if b["count"]} == {
        58: 10,
        292: 9,
        3326: 1,
    }
    day = (await http.get("/api/queues/mail/run-times?window=day")).json()
    assert (day["window"], day["count"]) == ("day", 20)


async def test_the_run_times_refuse_a_bad_window_and_an_unknown_name(
    http: httpx.AsyncClient, client: Client
) -> None:
    await client.enqueue("mail")
    reply = await http.get("/api/queues/mail/run-times?window=week")
    assert (reply.status_code, reply.json()) == (400, {"error": "window: hour or day, not 'week'"})
    assert (await http.get("/api/queues/nothing/run-times")).status_code == 404
    empty = (await http.get("/api/queues/mail/run-times")).json()
    assert (empty["count"], empty["p50_ms"], empty["max_ms"]) == (0, None, None)


async def test_the_run_times_are_in_the_openapi_document(http: httpx.AsyncClient) -> None:
    doc = (await http.get("/api/openapi.json")).json()
    op = doc["paths"]["/api/queues/{name}/run-times"]["get"]
    assert [p["name"] for p in op["parameters"]] == ["name", "window"]
    schema = doc["components"]["schemas"]["QueueRunTimes"]
    assert {"count", "p50_ms", "p95_ms", "p99_ms", "max_ms", "buckets"} <= set(schema["properties"])


def _now() -> int:
    return int(time.time() * 1000)


async def test_metrics_show_the_run_times_only_when_asked(
    http: httpx.AsyncClient, client: Client
) -> None:
    await finish_with_run_times(client, "mail", [40] * 10 + [200] * 9 + [3000], now_ms=_now())
    await client.enqueue("idle")
    assert "rota_job_run_time" not in (await http.get("/metrics")).text

    scrape = await http.get("/metrics?run_times=hour")
    assert scrape.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(scrape.text)}
    attempts = {s.labels["name"]: s.value for s in families["rota_job_run_time_attempts"].samples}
    assert attempts == {"mail": 20.0, "idle": 0.0}
    seconds = {
        (s.labels["name"], s.labels["quantile"]): s.value
        for s in families["rota_job_run_time_seconds"].samples
    }
    assert seconds == {("mail", "0.5"): 0.058, ("mail", "0.95"): 0.292, ("mail", "0.99"): 3.326}
    assert (await http.get("/metrics?run_times=week")).status_code == 400
