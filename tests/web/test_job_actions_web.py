"""One job's actions where it waits (a queued job to the front or deleted, a job to retry
killed) and the clean of a set by age, through the JSON API and a page's forms: each
answers what it did or 404 when the job moved on, refuses a bad age in one line, is
refused to the read-only credential, and goes into the audit log with the job or the
count it touched."""

from __future__ import annotations

import httpx
import pytest

from rota import Client, Settings
from rota.web import Auth, create_app
from tests.web.conftest import BASE
from tests.web.live import Seeded
from tests.web.test_api import error_of

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


async def _next_ids(http: httpx.AsyncClient, name: str) -> list[str]:
    page = (await http.get(f"/api/queues/{name}/jobs?order=oldest")).json()
    return [j["id"] for j in page["jobs"]]


@pytest.mark.one_shard("a queue's page over several shards is merged by enqueue time")
async def test_a_queued_job_to_the_front_then_deleted(
    http: httpx.AsyncClient, client: Client
) -> None:
    ids = [(await client.enqueue("mail", n=i)).id for i in range(3)]
    assert await _next_ids(http, "mail") == ids  # the next to run first
    done = await http.post(f"/api/queued/{ids[2]}/front")
    assert done.json() == {"id": ids[2], "front": True}
    assert await _next_ids(http, "mail") == [ids[2], ids[0], ids[1]]
    assert (await http.post(f"/api/queued/{ids[0]}/delete")).json() == {"deleted": 1}
    assert await client.job(ids[0]) is None
    again = error_of(await http.post(f"/api/queued/{ids[0]}/delete"), 404)
    assert again == f"job {ids[0]} is not queued (taken, finished or gone)"
    error_of(await http.post("/api/queued/nosuchjob/front"), 404)

    # from the queue's page: a form per job, a 303 back with a notice
    page = await http.get("/queues/mail", headers=FORM)
    assert f'action="/queued/{ids[1]}/front"' in page.text
    assert f'action="/queued/{ids[1]}/delete"' in page.text
    done = await http.post(f"/queued/{ids[1]}/front", data={"next": "/queues/mail"}, headers=FORM)
    assert done.status_code == 303 and done.headers["location"].startswith("/queues/mail?")
    assert await _next_ids(http, "mail") == [ids[1], ids[2]]
    job_page = await http.get(f"/jobs/{ids[1]}", headers=FORM)
    assert "Run next (to the front)" in job_page.text


async def test_kill_a_job_to_retry_and_the_audit_entry(
    http: httpx.AsyncClient, client: Client, seeded: Seeded
) -> None:
    first, second = seeded.retry
    page = await http.get("/retry", headers=FORM)
    assert f'action="/retry/{first}/kill"' in page.text
    assert (await http.post("/api/retry/kill", json={"ids": [first]})).json() == {"killed": 1}
    record = await client.job(first)
    assert record is not None and (record.state, record.reason) == ("dead", "killed")
    gone = error_of(await http.post("/api/retry/kill", json={"ids": [first, second]}), 404)
    assert gone == f"not among the retry jobs: {first}"
    assert await client.admin.in_set("retry", [second]) == [second]  # refused whole
    error_of(await http.post("/api/retry/kill", json={"ids": []}), 422)
    error_of(await http.post("/api/retry/kill", json={"all": True}), 422)
    done = await http.post(f"/retry/{second}/kill", data={"next": "/retry"}, headers=FORM)
    assert done.status_code == 303 and "done=killed" in done.headers["location"]
    assert (await http.post(f"/retry/{second}/kill", data={}, headers=FORM)).status_code == 404
    entries = (await http.get("/api/audit")).json()["entries"]
    assert [(e["path"], e.get("ids"), e.get("count")) for e in entries[:2]] == [
        (f"/retry/{second}/kill", [second], 1),
        ("/api/retry/kill", [first], 1),
    ]


async def test_a_scheduled_job_says_run_now(http: httpx.AsyncClient, client: Client) -> None:
    later = await client.enqueue_in(3600, "nap")
    for path in (f"/jobs/{later.id}", "/scheduled"):
        page = await http.get(path, headers=FORM)
        assert ">Run now</button>" in page.text and "Retry now" not in page.text, path
    done = await http.post(f"/scheduled/{later.id}/retry", data={}, headers=FORM)
    assert done.status_code == 303
    record = await client.job(later.id)
    assert record is not None and record.state == "queued"


async def test_clean_by_age_and_its_audit_entry(
    http: httpx.AsyncClient, client: Client, seeded: Seeded
) -> None:
    # a week: none of the jobs just made is that old
    assert (await http.post("/api/dead/clean", json={"older_than": 604800})).json() == {
        "deleted": 0
    }
    done = await http.post("/api/dead/clean", json={"older_than": 0, "name": "boom"})
    assert done.json() == {"deleted": len(seeded.dead)}
    assert [await client.job(i) for i in seeded.dead] == [None] * len(seeded.dead)
    sizes = await client.admin.job_set_sizes()
    assert (sizes["dead"], sizes["scheduled"]) == (len(seeded.flaky), 2)
    assert (await http.post("/api/scheduled/clean", json={"older_than": 0})).json() == {
        "deleted": 2
    }
    assert (await client.admin.job_set_sizes())["scheduled"] == 0
    kept = (await client.admin.finished()).total
    done = await http.post(
        "/complete/clean", data={"older_than": "0", "unit": "days"}, headers=FORM
    )
    assert done.status_code == 303 and f"n={kept}" in done.headers["location"]
    assert (await client.admin.finished()).total == 0
    entries = (await http.get("/api/audit")).json()["entries"]
    assert (entries[0]["path"], entries[0]["count"], entries[0]["filter"]) == (
        "/complete/clean",
        kept,
        {"older_than": 0.0},
    )
    assert (entries[2]["path"], entries[2]["filter"]) == (
        "/api/dead/clean",
        {"older_than": 0, "name": "boom"},
    )


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"older_than": -1}, 422, "older_than: must be from 0 to 315360000, got -1.0"),
        ({"older_than": 1e300}, 422, "older_than: must be from 0 to 315360000, got 1e+300"),
        ({"older_than": "a week"}, 422, None),
        ({"older_than": 1, "name": "no spaces"}, 422, None),
        ({"older_than": 1, "extra": 1}, 422, None),
    ],
)
async def test_a_bad_age_is_refused_in_one_line(
    http: httpx.AsyncClient, body: dict[str, object], status: int, error: str | None
) -> None:
    said = error_of(await http.post("/api/retry/clean", json=body), status)
    assert "\n" not in said
    if error is not None:
        assert said == error


async def test_a_nan_age_is_refused_by_the_api_and_the_form(http: httpx.AsyncClient) -> None:
    nan = await http.post(
        "/api/dead/clean",
        content=b'{"older_than": NaN}',
        headers={"content-type": "application/json"},
    )
    assert "\n" not in error_of(nan, 400)
    for value, unit in (("nan", "days"), ("1e300", "days"), ("-1", "hours"), ("1", "weeks")):
        done = await http.post(
            "/dead/clean", data={"older_than": value, "unit": unit}, headers=FORM
        )
        assert done.status_code == 400, (value, unit)
        assert "older_than" in done.text


async def test_the_read_only_credential_is_refused_every_action(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("mail")
    app = create_app(settings, client=client, auth=Auth(token="t-1", readonly_token="look-1"))
    look = {"authorization": "Bearer look-1"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as web:
        for path, body in (
            (f"/api/queued/{job.id}/front", None),
            (f"/api/queued/{job.id}/delete", None),
            ("/api/retry/kill", {"ids": [job.id]}),
            ("/api/dead/clean", {"older_than": 0}),
            ("/api/complete/clean", {"older_than": 0}),
        ):
            refused = await web.post(path, json=body, headers=look)
            assert refused.status_code == 403 and "read-only" in refused.text, path
        page = await web.get("/queues/mail", headers={**look, "accept": "text/html"})
        assert page.status_code == 200 and "/front" not in page.text
        dead = await web.get("/dead", headers={**look, "accept": "text/html"})
        assert 'action="/dead/clean"' not in dead.text
        assert (await web.get("/api/audit", headers=look)).json()["entries"] == []
    record = await client.job(job.id)
    assert record is not None and record.state == "queued"
