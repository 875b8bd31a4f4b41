"""A job name's figures per minute: ``/api/queues/{name}/stats`` and the charts of its
queue's page (processed and failed, and the mean run time of its complete jobs)."""

from __future__ import annotations

import datetime as dt
import re
import time

import httpx
import redis

from rota import Client


def _minute(t: dt.datetime) -> str:
    return t.strftime("%Y%m%d%H%M")


async def test_a_name_has_its_minutes(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    await client.enqueue("mail")
    now = dt.datetime.fromtimestamp(time.time(), dt.UTC).replace(second=0, microsecond=0)
    before = now - dt.timedelta(minutes=3)
    redis_sync.hset(
        client.admin.shards[0].keys.stats_bucket(_minute(before)),
        mapping={"processed:mail": 4, "failed:mail": 1, "ms:mail": 1000, "processed:other": 9},
    )
    redis_sync.hset(
        client.admin.shards[0].keys.stats_bucket(_minute(now)), mapping={"failed:mail": 2}
    )
    reply = await http.get("/api/queues/mail/stats")
    assert reply.status_code == 200
    data = reply.json()
    assert data["name"] == "mail"
    minutes = {m["start"]: m for m in data["minutes"]}
    assert len(data["minutes"]) == 60
    assert [m["start"] for m in data["minutes"]] == sorted(minutes)
    at = round(before.timestamp() * 1000)
    assert minutes[at] == {
        "start": at,
        "processed": 4,
        "failed": 1,
        "ran_ms": 1000,
        "mean_ms": 250.0,
    }
    last = minutes[round(now.timestamp() * 1000)]
    assert (last["processed"], last["failed"], last["mean_ms"]) == (0, 2, None)
    assert sum(m["processed"] for m in data["minutes"]) == 4  # not the other name's
    few = (await http.get("/api/queues/mail/stats", params={"minutes": 5})).json()
    assert len(few["minutes"]) == 5
    assert (await http.get("/api/queues/mail/stats", params={"minutes": 0})).status_code == 400
    assert (await http.get("/api/queues/nosuch/stats")).status_code == 404
    schema = (await http.get("/api/openapi.json")).json()
    assert "/api/queues/{name}/stats" in schema["paths"]
    assert "NameStats" in schema["components"]["schemas"]

    page = (await http.get("/queues/mail", headers={"accept": "text/html"})).text
    label = before.strftime("%H:%M")
    assert f"{label} UTC: 4 processed, 1 failed" in page
    assert f"{label} UTC: mean 250 ms over 4 jobs" in page
    assert re.search(r"mean run time\s+250 ms · slowest minute 250 ms", page)
    assert f"{now.strftime('%H:%M')} UTC: no job completed" in page
    for chart in ('class="chart">', 'id="duration-chart"'):  # each plot: grid, axis, labels
        plot = page[page.index(chart) :]
        plot = plot[: plot.index("</figure>")]
        assert plot.count('class="grid"') == 2 and plot.count('class="axis"') == 1, chart
        assert '<div class="xlabels"><span>' in plot, chart
