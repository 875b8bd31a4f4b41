"""The finished jobs page and its API (``/complete``, ``/api/complete``), and searching the
job sets by content from the web: newest first, time windows, a page of one name that
stops and goes on, hostile text shown as text (in Chromium too), the read-only
credential."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.client import finished
from rota.web import complete, create_app
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer
from tests.test_acl import settings_for
from tests.web.live import IMG, SCRIPT

HTML = {"accept": "text/html"}
TOKEN, READONLY = "tok-admin-c", "tok-look-c"


async def finish_jobs(client: Client, redis_url: str, namespace: str) -> None:
    """20 complete ``echo`` jobs (e00..e19, one at a time), 5 of ``tally``; ``e07``'s args
    and result hold a script and an image; a dead ``charge`` job that timed out."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=3600.0))

    @pool.job
    async def echo(ctx: JobContext, text: str) -> dict[str, str]:
        return {"said": text}

    @pool.job
    async def tally(ctx: JobContext, n: int) -> int:
        return n * 2

    @pool.job(max_fails=1)
    async def charge(ctx: JobContext, order: int) -> None:
        raise TimeoutError(f"the gateway did not answer for order {order}")

    async with pool.running():
        for i in range(20):
            text = f"{SCRIPT} {IMG}" if i == 7 else f"hello {i}"
            await client.enqueue_many(
                [JobSpec(name="echo", kwargs={"text": text}, job_id=f"e{i:02d}")]
            )
        for i in range(5):
            await client.enqueue("tally", i, job_id=f"t{i:02d}")
        await client.enqueue("charge", order=42, job_id="c42")

        async def settled() -> bool:
            stats = await client.admin.stats()
            return stats.get("processed", 0) >= 25 and stats.get("dead", 0) >= 1

        await wait_until(settled, within=20)


@pytest.fixture
async def done(client: Client, redis_url: str, namespace: str) -> None:
    await finish_jobs(client, redis_url, namespace)


async def test_the_api_lists_newest_first_in_pages_and_windows(
    http: httpx.AsyncClient, done: None
) -> None:
    whole = (await http.get("/api/complete?count=100")).json()
    assert (whole["total"], whole["size"], whole["searched"]) == (25, 25, 25)
    times = [j["finished_at"] for j in whole["jobs"]]
    assert times == sorted(times, reverse=True)
    e3 = next(j for j in whole["jobs"] if j["id"] == "e03")
    assert e3["result"] == '{"said":"hello 3"}' and e3["run_ms"] is not None
    assert e3["run_ms"] == e3["finished_at"] - e3["started_at"]
    second = (await http.get("/api/complete?offset=10&count=10")).json()
    assert [j["id"] for j in second["jobs"]] == [j["id"] for j in whole["jobs"][10:20]]
    named = (await http.get("/api/complete?name=tally&count=100")).json()
    assert sorted(j["id"] for j in named["jobs"]) == [f"t{i:02d}" for i in range(5)]
    assert named["next_until"] is None
    since, until = times[15], times[3]
    window = (await http.get(f"/api/complete?since={since}&until={until}&count=100")).json()
    assert [j["id"] for j in window["jobs"]] == [
        j["id"] for j in whole["jobs"] if since <= j["finished_at"] <= until
    ]
    iso = (await http.get("/api/complete?since=2999-01-01T00:00")).json()
    assert iso["total"] == 0
    bad = await http.get("/api/complete?since=yesterday")
    assert bad.status_code == 400 and "since:" in bad.json()["error"]
    assert (await http.get("/api/complete?order=random")).status_code == 400
    assert (await http.get("/api/complete?name=no%20name")).status_code == 400


async def test_a_page_of_one_name_that_stops_says_where_and_links_on(
    http: httpx.AsyncClient, done: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(complete, "SCAN_BUDGET", 0)
    monkeypatch.setattr(finished, "SEARCH_CHUNK", 3)  # a round trip reads 3 jobs a shard
    page = await http.get("/complete?name=echo", headers=HTML)
    assert page.status_code == 200
    assert "the search stopped there" in page.text
    seen: list[str] = re.findall(r'href="/jobs/(e\d\d)"', page.text)
    while (link := re.search(r'id="search-on" href="([^"]+)"', page.text)) is not None:
        page = await http.get("/complete" + html.unescape(link[1]), headers=HTML)
        seen += re.findall(r'href="/jobs/(e\d\d)"', page.text)
    assert sorted(seen) == [f"e{i:02d}" for i in range(20)]  # each once, in the pages' order
    assert "the search stopped there" not in page.text


async def test_a_search_finds_jobs_by_content_from_the_web(
    http: httpx.AsyncClient, done: None
) -> None:
    dead = (await http.get("/api/dead?q=did+not+answer&fields=content")).json()
    assert [j["id"] for j in dead["jobs"]] == ["c42"] and dead["fields"] == "content"
    assert (await http.get("/api/dead?q=did+not+answer")).json()["total"] == 0
    assert (await http.get("/api/dead?q=x&fields=all")).status_code == 400
    found = (await http.get("/api/complete?q=hello+12&fields=content")).json()
    assert [j["id"] for j in found["jobs"]] == ["e12"]
    page = await http.get("/dead?q=order+42&fields=content", headers=HTML)
    assert "c42" in page.text and 'name="fields" value="content"' in page.text


async def test_hostile_text_in_a_result_is_escaped(http: httpx.AsyncClient, done: None) -> None:
    page = await http.get("/complete", headers=HTML)
    assert SCRIPT not in page.text and IMG not in page.text
    assert html.escape(SCRIPT, quote=False) in page.text.replace("&#34;", '"')


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    """A redis-server of its own for the ACL users (as tests/test_acl.py's)."""
    with RedisServer() as s:
        version = s.client().info("server")["redis_version"]
        if int(str(version).split(".")[0]) < 7:
            pytest.skip(f"the roles use Redis 7's key selectors; this is {version}")
        yield s


@pytest.mark.one_shard("the ACL server holds one shard")
async def test_the_read_only_redis_role_serves_the_finished_jobs_and_content_search(
    acl_server: RedisServer, namespace: str
) -> None:
    server = acl_server
    async with Client.from_url(server.url, namespace) as admin:
        await finish_jobs(admin, server.url, namespace)
    app = create_app(settings_for(server, "web", namespace))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        for path in ("/complete", "/complete?name=echo&q=hello+1&fields=content"):
            page = await http.get(path, headers=HTML)
            assert page.status_code == 200, (path, page.text[:300])
        api = (await http.get("/api/complete?count=5")).json()
        assert api["total"] == 25 and len(api["jobs"]) == 5
        dead = (await http.get("/api/dead?q=gateway&fields=content")).json()
        assert [j["id"] for j in dead["jobs"]] == ["c42"]
