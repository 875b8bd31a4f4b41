"""One fair key's jobs in the web UI and its API: a page of its queued jobs in turn
order with its running ones, paged, linked from the keys table and linking each job to
its page; hostile key text escaped; garbage in the key's list shown as malformed; the
read-only credential and the read-only Redis user read it. And what ``/metrics?keys=top``
costs: round trips counted on the connection (never times), the same with 3 names as
with 30. Real Redis."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
import redis
from markupsafe import escape
from redis.asyncio.connection import AbstractConnection

from rota import Client, JobSpec, Settings
from rota.protocol import calls
from rota.protocol.shards import shard_of
from rota.web import Auth, create_app
from tests.redis_server import RedisServer
from tests.test_acl import admin, server, settings_for  # noqa: F401 - fixtures
from tests.web.conftest import BASE

HTML = {"accept": "text/html"}
HOSTILE = "<script>alert('x')</script>\"&/?#%"


async def _keyed(client: Client, counts: dict[str, int], name: str = "hook") -> list[str]:
    """``counts`` jobs of each key of job name ``name``: their ids, in order."""
    specs = [
        JobSpec(name=name, args=(i,), fair_key=key) for key, n in counts.items() for i in range(n)
    ]
    return [job.id for job in await client.enqueue_many(specs)]


async def _lease(client: Client, key: str) -> list[str]:
    shards = client.admin.shards
    scope = shards[shard_of(key, len(shards))].scope
    reply = await calls.fetch(scope, calls.Lessee(30_000, "pool-1", 1 << 20), ["hook"], [])
    return [job.id for job in reply.jobs]


def _path(key: str, page: bool = False) -> str:
    return ("" if page else "/api") + "/queues/hook/keys/" + quote(key, safe="") + "/jobs"


async def test_a_keys_jobs_by_the_api_paged_with_its_running_ones(
    http: httpx.AsyncClient, client: Client
) -> None:
    ids = await _keyed(client, {"t": 5})
    await client.admin.fair.set_weight("hook", "t", 3)
    assert await _lease(client, "t") == ids[:1]
    got = (await http.get(_path("t") + "?offset=1&count=2")).json()
    assert (got["name"], got["key"], got["queued"], got["running"]) == ("hook", "t", 4, 1)
    assert (got["weight"], got["offset"], got["count"], got["malformed"]) == (3, 1, 2, [])
    assert [j["id"] for j in got["jobs"]] == ids[2:4]  # the next to run first, one skipped
    (running,) = got["running_jobs"]
    assert (running["id"], running["state"]) == (ids[0], "running")
    assert running["deadline"] > 10**12 and running["started_at"] > 10**12  # ms
    assert got["jobs"][0]["enqueued_at"] > 10**12
    for bad in ("?count=0", "?count=1001", "?offset=-1", "?offset=x"):
        refused = await http.get(_path("t") + bad)
        assert refused.status_code == 400, bad
    assert (await http.get("/api/queues/hook/keys/with%20space/jobs")).status_code == 404
    assert (await http.get("/api/queues/nope/keys/t/jobs")).status_code == 404


async def test_the_keys_page_escapes_its_key_links_its_jobs_and_pages(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    ids = await _keyed(client, {HOSTILE: 52, "plain": 1})
    table = (await http.get("/queues/hook", headers=HTML)).text
    link = f"/queues/hook/keys/{quote(HOSTILE)}/jobs"
    assert f'href="{escape(link)}"' in table  # the keys table links the key's page
    page = await http.get(link, headers=HTML)
    assert page.status_code == 200
    assert HOSTILE not in page.text and "<script>alert" not in page.text
    assert f'<span class="mono" id="key-name">{escape(HOSTILE)}</span>' in page.text
    assert f'<a href="/jobs/{ids[0]}">{ids[0]}</a>' in page.text
    assert ids[50] not in page.text  # 50 a page
    assert 'href="?offset=50" rel="next"' in page.text and "Showing 1–50 of 52" in page.text
    second = (await http.get(link + "?offset=50", headers=HTML)).text
    assert f'<a href="/jobs/{ids[51]}">{ids[51]}</a>' in second and ids[0] not in second
    # garbage written by hand in the key's list and its settings
    shards = client.admin.shards
    prefix = shards[shard_of("plain", len(shards))].keys.prefix  # the key's own shard
    redis_sync.lpush(prefix + "fqueue:hook/plain", "<b>not an id</b>")
    redis_sync.hset(prefix + "fset:hook", "w/plain", "nan")
    shown = (await http.get(_path("plain", page=True), headers=HTML)).text
    assert '&lt;b&gt;not an id&lt;/b&gt; <span class="badge st-malformed">malformed' in shown
    assert "malformed: weight" in shown
    api = (await http.get(_path("plain"))).json()
    assert api["malformed"] == ["weight"] and api["jobs"][-1]["state"] == "malformed"
    keys = (await http.get("/api/queues/hook/keys")).json()["keys"]
    assert [k["malformed"] for k in keys if k["key"] == "plain"] == [["weight"]]


async def test_the_read_only_credential_reads_a_keys_jobs(
    settings: Settings, client: Client
) -> None:
    ids = await _keyed(client, {"t1": 2})
    auth = Auth(token="fair-tok", readonly_token="fair-look")
    app = create_app(settings, client=client, auth=auth)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as web:
        look = {"authorization": "Bearer fair-look"}
        page = await web.get("/queues/hook/keys/t1/jobs", headers={**look, **HTML})
        assert page.status_code == 200 and f'<a href="/jobs/{ids[0]}">' in page.text
        api = await web.get("/api/queues/hook/keys/t1/jobs", headers=look)
        assert [j["id"] for j in api.json()["jobs"]] == ids
        assert (await web.get("/api/queues/hook/keys/t1/jobs")).status_code == 401


@pytest.mark.one_shard("the role's user is granted one shard's keys (make_user)")
async def test_the_read_only_redis_user_reads_a_keys_jobs(
    server: RedisServer,  # noqa: F811
    namespace: str,
    admin: Client,  # noqa: F811
) -> None:
    """Under the Redis user of ``rota acl web``."""
    ids = await _keyed(admin, {"t1": 2})
    app = create_app(settings_for(server, "web", namespace))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=BASE) as web,
    ):
        got = await web.get("/api/queues/hook/keys/t1/jobs")
        assert got.status_code == 200, got.text
        assert [j["id"] for j in got.json()["jobs"]] == ids
        assert (await web.get("/queues/hook/keys/t1/jobs", headers=HTML)).status_code == 200


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A count of what every redis-py connection writes to a server: one a command or a
    pipeline, a round trip each (the server itself answers, unchanged)."""
    count = [0]
    send = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, *args: object, **kwargs: object) -> None:
        count[0] += 1
        await send(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return count


async def _trips(http: httpx.AsyncClient, count: list[int], path: str) -> int:
    await http.get(path)  # the connections it needs, opened once
    before = count[0]
    assert (await http.get(path)).status_code == 200
    return count[0] - before


async def test_metrics_read_the_top_keys_of_every_name_in_two_round_trips_a_shard(
    http: httpx.AsyncClient, client: Client, round_trips: list[int]
) -> None:
    costs = []
    for names in (range(3), range(3, 30)):
        for n in names:
            await _keyed(client, {"a": 2, "b": 1, "c": 3}, name=f"n{n:02}")
        plain = await _trips(http, round_trips, "/metrics")
        keyed = await _trips(http, round_trips, "/metrics?keys=top")
        costs.append(keyed - plain)
    # every name's ranking in one pipeline, the keys' figures in one more (it was two
    # round trips per name and shard: 6 with 3 names, 60 with 30)
    assert costs[0] == costs[1] <= 2 * len(client.admin.shards), costs
