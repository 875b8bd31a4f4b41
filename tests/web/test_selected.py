"""Retry or delete the jobs ticked on a page of a set: only those, under a search too,
each action in the audit log with the ids it acted on."""

from __future__ import annotations

import httpx

from rota import Client
from rota.web.sets import MAX_IDS
from tests.web.conftest import BASE
from tests.web.live import Seeded

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


async def _states(client: Client, ids: list[str]) -> list[str | None]:
    records = [await client.job(i) for i in ids]
    return [r.state if r is not None else None for r in records]


async def test_only_the_selected_jobs_are_retried_or_deleted(
    http: httpx.AsyncClient, client: Client, seeded: Seeded
) -> None:
    boom = seeded.dead  # 4 jobs of "boom", all matching the search below
    here = "/dead?q=boom"
    page = await http.get(here, headers=FORM)
    assert page.text.count('name="id" value=') == 4  # the flaky jobs do not match
    assert 'formaction="/dead/retry-selected"' in page.text
    assert f'<input type="hidden" name="next" value="{here}">' in page.text
    ticked = {"id": [boom[1], boom[3]], "next": here}
    done = await http.post("/dead/retry-selected", data=ticked, headers=FORM)
    assert (done.status_code, done.headers["location"]) == (303, f"{here}&done=retried&n=2")
    assert await _states(client, boom) == ["dead", "queued", "dead", "queued"]
    assert await _states(client, seeded.flaky) == ["dead", "dead"]
    # ids no longer in the set (retried just now, or never there) are passed over
    ticked = {"id": [boom[0], boom[1], "no-such-job"], "next": "/dead"}
    done = await http.post("/dead/delete-selected", data=ticked, headers=FORM)
    assert done.headers["location"] == "/dead?done=deleted&n=1"
    assert await _states(client, boom) == [None, "queued", "dead", "queued"]
    shown = await http.get(done.headers["location"], headers=FORM)
    assert "1 jobs deleted." in shown.text
    log = (await http.get("/api/audit")).json()["entries"]
    assert [(e["path"], e["ids"], e["count"]) for e in log] == [
        ("/dead/delete-selected", [boom[0]], 1),
        ("/dead/retry-selected", [boom[1], boom[3]], 2),
    ]
    audit = await http.get("/audit", headers=FORM)
    said = f'/dead/retry-selected<span class="ids"> · 2 jobs: {boom[1]}, {boom[3]}</span>'
    assert said in audit.text


async def test_nothing_selected_changes_nothing(
    http: httpx.AsyncClient, client: Client, seeded: Seeded
) -> None:
    done = await http.post("/retry/retry-selected", data={"next": "/retry"}, headers=FORM)
    assert done.headers["location"] == "/retry?done=none-selected"
    assert (await client.admin.page("retry")).total == len(seeded.retry)
    page = await http.get(done.headers["location"], headers=FORM)
    assert "No job selected" in page.text
    # a waiting job is never retried: there is no such button
    job = await client.enqueue("mail", 1, after=[seeded.retry[0]])
    data = {"id": job.id, "next": "/waiting"}
    assert (await http.post("/waiting/retry-selected", data=data, headers=FORM)).status_code == 404
    done = await http.post("/waiting/delete-selected", data=data, headers=FORM)
    assert done.headers["location"] == "/waiting?done=deleted&n=1"
    too_many = {"id": [f"j{i}" for i in range(MAX_IDS + 1)]}
    refused = await http.post("/scheduled/delete-selected", data=too_many, headers=FORM)
    assert refused.status_code == 400
    assert (await client.admin.page("scheduled")).total == len(seeded.scheduled)
    log = (await http.get("/api/audit")).json()["entries"]
    assert [(e["path"], e.get("ids")) for e in log] == [
        ("/waiting/delete-selected", [job.id]),
        ("/retry/retry-selected", None),
    ]


async def test_the_api_records_the_ids_it_acted_on(http: httpx.AsyncClient, seeded: Seeded) -> None:
    ids = seeded.scheduled
    answer = await http.post("/api/scheduled/delete", json={"ids": ids})
    assert answer.json() == {"deleted": 2}
    (entry,) = (await http.get("/api/audit")).json()["entries"]
    assert (entry["path"], entry["ids"], entry["count"]) == ("/api/scheduled/delete", ids, 2)
