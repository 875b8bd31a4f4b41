"""The filtered bulk actions of the pages (``POST /<set>/retry-all``, ``/delete-all``
under a search): a ``from``, ``to`` or ``q`` out of its range is refused with a one-line
400 naming the field, before anything is done (``from=99999999999999999999`` used to be
a 500, ``nan`` or ``-1e300`` ignored, so the action took the whole search); the audit
entry of one that went through records its filter and how many jobs it acted on."""

from __future__ import annotations

import httpx
import pytest

from rota import Client, JobSpec
from rota.web import sets as views
from rota.web.sets import MAX_POSITION, MAX_SEARCH
from tests.web.test_pages import FORM

BULK = [
    f"/{which}/{action}-all"
    for which in views.JOB_SETS
    for action in (("retry", "delete") if which in views.RETRYABLE else ("delete",))
]
BAD_POSITIONS = [
    "1e300",
    "-1e300",
    "99999999999999999999",
    "9" * 5000,
    str(MAX_POSITION + 1),
    "-1",
    "nan",
    "inf",
    "1.5",
    "０",  # a full-width digit
    "²",
    "ten",
    "0x10",
    "1_000",
    "5\n6",
]


async def _sizes(client: Client) -> dict[str, int]:
    return {w: (await client.admin.page(w, 0, 1)).total for w in views.JOB_SETS}


@pytest.fixture
async def jobs(client: Client) -> None:
    """Jobs in every set, each matching the search ``j``."""
    for which in views.JOB_SETS:
        (job,) = await client.enqueue_many([JobSpec(name="j", delay=3600, job_id=f"j-{which}")])
        if which != "scheduled":
            await client.admin.shards[0].redis.zrem(client.admin.shards[0].keys.scheduled, job.id)
            await client.admin.shards[0].redis.zadd(
                getattr(client.admin.shards[0].keys, which), {job.id: 1}
            )


@pytest.mark.parametrize("path", BULK)
async def test_every_bad_value_of_every_filtered_bulk_action_is_a_400(
    path: str, http: httpx.AsyncClient, client: Client, jobs: None
) -> None:
    before = await _sizes(client)
    assert all(before.values()), before
    bad = [(field, value) for field in ("from", "to") for value in BAD_POSITIONS]
    bad.append(("q", "j" * (MAX_SEARCH + 1)))
    for field, value in bad:
        form = {"next": "/", "q": "j", "from": "0", "to": "10", field: value}
        answer = await http.post(path, data=form, headers={**FORM, "accept": "*/*"})
        assert answer.status_code == 400, (path, field, value, answer.text)
        message = answer.json()["error"]
        assert message.startswith(f"{field}: ") and "\n" not in message, message
    assert await _sizes(client) == before  # nothing was done
    # the bounds themselves are taken
    form = {"next": "/", "q": "nothing-matches", "from": "0", "to": str(MAX_POSITION)}
    assert (await http.post(path, data=form, headers=FORM)).status_code == 303


async def test_the_audit_entry_of_a_filtered_bulk_action_records_filter_and_count(
    http: httpx.AsyncClient, client: Client
) -> None:
    for i in range(6):
        name = "match" if i < 4 else "other"
        await client.enqueue_many([JobSpec(name=name, job_id=f"a{i}", delay=3600 + i)])
    form = {"next": "/scheduled", "q": "match", "from": "1", "to": "5"}
    done = await http.post("/scheduled/delete-all", data=form, headers=FORM)
    assert done.status_code == 303 and done.headers["location"].endswith("n=3")
    done = await http.post("/scheduled/retry-all", data={"next": "/scheduled"}, headers=FORM)
    assert done.status_code == 303 and done.headers["location"].endswith("n=3")
    entries = (await http.get("/api/audit")).json()["entries"]
    assert entries[0]["path"] == "/scheduled/retry-all" and entries[0]["count"] == 3
    assert "filter" not in entries[0]  # no search: the whole set
    assert entries[1]["path"] == "/scheduled/delete-all"
    assert entries[1]["filter"] == {"q": "match", "from": 1, "to": 5}
    assert entries[1]["count"] == 3
    page = await http.get("/audit", headers=FORM)
    assert "matching “match” among jobs 1–5" in page.text and "3 jobs" in page.text
