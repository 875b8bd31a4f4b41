"""The HTML pages' form actions (what the buttons post), with the real Redis."""

from __future__ import annotations

import re

import httpx
import redis

from rota import Client, JobContext, WorkerPool
from tests.helpers import pool_settings
from tests.web.conftest import BASE
from tests.web.live import Seeded
from tests.web.test_api import snapshot

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}


async def test_queue_buttons(http: httpx.AsyncClient, client: Client) -> None:
    for i in range(3):
        await client.enqueue("mail", i)
    done = await http.post("/queues/mail/pause", data={"next": "/queues"}, headers=FORM)
    assert (done.status_code, done.headers["location"]) == (303, "/queues?done=paused")
    assert (await client.admin.queues())[0].paused
    page = await http.get(done.headers["location"], headers=FORM)
    assert "Queue paused." in page.text and "Resume" in page.text
    done = await http.post("/queues/mail/resume", data={"next": "/queues"}, headers=FORM)
    assert not (await client.admin.queues())[0].paused
    done = await http.post("/queues/mail/clear", data={"next": "/queues"}, headers=FORM)
    assert done.headers["location"] == "/queues?done=cleared&n=3"
    assert (await client.admin.queues())[0].size == 0


async def test_dead_buttons(http: httpx.AsyncClient, client: Client, seeded: Seeded) -> None:
    here = "/dead?q=boom&offset=0"
    one = seeded.dead[1]
    done = await http.post(f"/dead/{one}/retry", data={"next": here}, headers=FORM)
    assert done.status_code == 303
    assert done.headers["location"] == "/dead?q=boom&offset=0&done=retried&n=1"
    record = await client.job(one)
    assert record is not None and record.state == "queued"
    # deleting from the job's own page goes back to the list: the page is gone
    two = seeded.dead[2]
    done = await http.post(f"/dead/{two}/delete", data={"next": f"/jobs/{two}"}, headers=FORM)
    assert done.headers["location"] == "/dead?done=deleted&n=1"
    assert await client.job(two) is None
    done = await http.post("/dead/retry-all", data={"next": "/dead"}, headers=FORM)
    assert done.headers["location"] == "/dead?done=retried&n=4"
    page = await http.get("/dead?done=retried&n=4", headers=FORM)
    assert "4 jobs queued again." in page.text
    await http.post("/retry/delete-all", data={"next": "/retry"}, headers=FORM)
    assert (await client.admin.page("retry")).total == 0


async def test_abort_button(http: httpx.AsyncClient, client: Client) -> None:
    job = await client.enqueue("mail", 1)
    done = await http.post(f"/jobs/{job.id}/abort", headers=FORM)
    assert done.headers["location"] == f"/jobs/{job.id}?done=aborted"
    page = await http.get(done.headers["location"], headers=FORM)
    assert "Abort requested." in page.text and "aborted" in page.text


async def test_refused_buttons_change_nothing(
    http: httpx.AsyncClient, seeded: Seeded, redis_sync: redis.Redis, namespace: str
) -> None:
    before = snapshot(redis_sync, namespace)
    for path in (
        "/dead/nosuch/retry",
        f"/retry/{seeded.dead[0]}/retry",  # dead, not in retry
        f"/dead/{seeded.dead[0]}/explode",
        "/queues/nosuch/pause",
        "/queues/boom/explode",
        "/jobs/nosuch/abort",
    ):
        page = await http.post(path, data={"next": "/"}, headers=FORM)
        assert page.status_code == 404, path
        assert page.headers["content-type"].startswith("text/html")
    assert snapshot(redis_sync, namespace) == before
    # a redirect stays on this server whatever "next" says
    evil = await http.post(f"/dead/{seeded.dead[0]}/retry", data={"next": "//evil.example/"})
    assert evil.headers["location"] == "/dead?done=retried&n=1"


async def test_unknown_pages(http: httpx.AsyncClient) -> None:
    page = await http.get("/jobs/nosuch", headers=FORM)
    assert page.status_code == 404 and "no job nosuch" in page.text
    assert (await http.get("/nothing", headers=FORM)).status_code == 404
    assert (await http.get("/queues/x/pause", headers=FORM)).status_code == 405


async def test_bulk_buttons_under_a_search_act_on_the_matching_jobs_only(
    http: httpx.AsyncClient, client: Client
) -> None:
    """The page lists the jobs matching a search; its bulk button says how many and acts
    on those. It used to delete every dead job (4 named ``ok`` among 21 gone)."""
    for i in range(21):
        await client.enqueue("ok" if i < 4 else "boom", i, job_id=f"d{i:02d}", max_fails=1)
        shard = await client.admin.shard_holding(f"d{i:02d}")  # dead where its record is
        await shard.redis.zadd(shard.keys.dead, {f"d{i:02d}": i})
    for shard in client.admin.shards:
        await shard.redis.delete(shard.keys.queue("ok"), shard.keys.queue("boom"))
    page = await http.get("/dead?q=ok", headers=FORM)
    assert "Delete the 4 matching" in page.text and "Delete all" not in page.text
    done = await http.post("/dead/delete-all", data={"next": "/dead?q=ok", "q": "ok"}, headers=FORM)
    assert done.headers["location"] == "/dead?q=ok&done=deleted&n=4"
    left = await client.admin.page("dead", 0, 100)
    assert left.total == 17 and {j.name for j in left.jobs} == {"boom"}
    done = await http.post("/dead/retry-all", data={"next": "/dead", "q": "nothing"}, headers=FORM)
    assert done.headers["location"] == "/dead?done=retried&n=0"
    assert (await client.admin.page("dead")).total == 17


async def test_rate_and_limit_forms_and_what_they_refuse(
    http: httpx.AsyncClient, client: Client
) -> None:
    await client.enqueue("mail", 1)
    page = await http.get("/queues", headers=FORM)
    assert 'action="/queues/mail/limit"' in page.text and 'name="limit"' in page.text
    three = {"limit": "3", "next": "/queues"}
    done = await http.post("/queues/mail/limit", data=three, headers=FORM)
    assert done.headers["location"] == "/queues?done=limit-set"
    assert (await client.admin.queues())[0].limit == 3
    assert "Concurrency limit set." in (await http.get(done.headers["location"], headers=FORM)).text
    for field, value, words in (
        ("rate", "often", "often"),
        ("limit", "0", "from 1 to"),
        ("limit", "many", "not &#39;many&#39;"),
    ):
        refused = await http.post(
            f"/queues/mail/{field}", data={field: value, "next": "/queues"}, headers=FORM
        )
        # the queues page again, with the error above it: not a bare error page
        assert refused.status_code == 400
        assert 'id="form-error"' in refused.text and words in refused.text
        assert 'action="/queues/mail/rate"' in refused.text
    assert (await client.admin.queues())[0].limit == 3
    none = {"limit": "", "next": "/queues"}
    done = await http.post("/queues/mail/limit", data=none, headers=FORM)
    assert done.headers["location"] == "/queues?done=limit-removed"
    assert (await client.admin.queues())[0].limit is None


async def test_queues_are_paged_server_side_the_busiest_first(
    http: httpx.AsyncClient, client: Client
) -> None:
    """5,000 names made /queues 8 MB of HTML; a page now holds 100 of them."""
    names = [f"n{i:04d}" for i in range(250)]
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.names, *names)
    for _ in range(3):
        await client.enqueue("n0200", 1)
    await client.enqueue("n0100", 1)
    page = await http.get("/queues", headers=FORM)
    assert page.status_code == 200 and len(page.content) < 250_000
    rows = re.findall(r'<td data-label="Name" class="name"><a [^>]*>(n\d+)</a>', page.text)
    assert rows[:3] == ["n0200", "n0100", "n0000"] and len(rows) == 100
    assert "1–100 of 250 job names" in page.text and "?offset=100" in page.text
    last = await http.get("/queues?offset=200", headers=FORM)
    assert re.findall(r'class="name"><a [^>]*>(n\d+)<', last.text)[-1] == "n0249"
    api = (await http.get("/api/queues", params={"offset": 100, "limit": 50})).json()
    assert (api["total"], api["offset"], api["limit"], len(api["queues"])) == (250, 100, 50, 50)
    assert (await http.get("/api/queues", params={"limit": 0})).status_code == 400


async def test_a_queue_no_pool_serves_says_so(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    await client.admin.pause("served")  # its job stays queued while its pool runs
    await client.enqueue("served", 1)
    await client.enqueue("orphan", 1)
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def served(ctx: JobContext, n: int) -> None:
        pass

    async with pool.running(client=client):
        api = (await http.get("/api/queues")).json()
        page = await http.get("/queues", headers=FORM)
    flags = {q["name"]: q["served"] for q in api["queues"]}
    assert flags == {"served": True, "orphan": False}
    assert page.text.count('class="badge warn no-pool"') == 1
