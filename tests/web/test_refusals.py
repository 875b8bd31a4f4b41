"""A Redis that refuses writes, seen from the web server: a private redis-server pushed
over its memory limit (``noeviction``), or made a read-only replica, answers the API with
503s that say why (never a 500), and ``/metrics`` says so in its own gauges."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis
import redis.exceptions
from prometheus_client.parser import text_string_to_metric_families

from rota import Client
from rota.redis.outage import MEANING, Condition
from rota.web import create_app
from tests.helpers import fill_up as fill_up_helper
from tests.helpers import pool_settings
from tests.redis_server import RedisServer
from tests.web.conftest import BASE
from tests.web.test_api import error_of, snapshot

NS = "refused"


@pytest.fixture
def server(full_redis_server: RedisServer) -> RedisServer:
    return full_redis_server


@pytest.fixture
def sync(server: RedisServer) -> Iterator[redis.Redis]:
    r = server.client()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
async def own(server: RedisServer) -> AsyncIterator[Client]:
    async with Client.from_url(server.url, NS) as c:
        yield c


@pytest.fixture
async def web(server: RedisServer, own: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(pool_settings(server.url, NS), client=own)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


def fill_up(r: redis.Redis) -> None:
    """Some data, then a memory limit below what is in use: Redis refuses writes that
    grow it (and takes the rest)."""
    for i in range(100):
        r.set(f"ballast:{i}", "x" * 1000)
    fill_up_helper(r)


def make_replica(r: redis.Redis, nowhere: int) -> None:
    """Make the server a replica of a primary that is not there (at ``nowhere``, a port
    that refuses): it keeps its data and refuses every write with READONLY."""
    r.replicaof("127.0.0.1", nowhere)
    with pytest.raises(redis.exceptions.ReadOnlyError, match="read only replica"):
        r.set("probe", "x")


def plant_dead(r: redis.Redis, job_id: str) -> None:
    p = "{" + NS + "}:"
    r.hset(p + "job:" + job_id, mapping={"name": "mail", "args": "{}", "state": "dead"})
    r.zadd(p + "dead", {job_id: 1000})


def gauges(text: str) -> dict[tuple[str, str], float]:
    """(metric, condition label or "") -> value of the rota_redis_* gauges."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("rota_redis_"):
                out[(s.name, s.labels.get("condition", ""))] = float(s.value)
    return out


async def test_enqueue_on_a_full_redis_is_a_503_that_says_so(
    web: httpx.AsyncClient, own: Client, sync: redis.Redis
) -> None:
    await own.enqueue("mail", 1)
    fill_up(sync)
    before = snapshot(sync, NS)
    message = error_of(await web.post("/api/jobs", json={"name": "mail", "args": [2]}), 503)
    assert message.startswith(MEANING[Condition.OUT_OF_MEMORY])  # "...: out of memory"
    assert "the job was not enqueued" in message
    assert snapshot(sync, NS) == before
    # what frees memory or only reads still works on a full Redis
    assert (await web.post("/api/queues/mail/pause")).json() == {"name": "mail", "paused": True}
    assert (await web.get("/api/queues")).status_code == 200
    page = await web.get("/queues", headers={"accept": "text/html"})
    assert page.status_code == 200
    sync.config_set("maxmemory", "0")  # room again: enqueues go through
    assert (await web.post("/api/jobs", json={"name": "mail"})).status_code == 201


async def test_metrics_say_redis_is_full(
    web: httpx.AsyncClient, own: Client, sync: redis.Redis
) -> None:
    await own.enqueue("mail", 1)
    normal = gauges((await web.get("/metrics")).text)
    assert normal[("rota_redis_refusing_writes", "out_of_memory")] == 0
    assert normal[("rota_redis_refusing_writes", "read_only")] == 0
    assert normal[("rota_redis_memory_used_bytes", "")] > 0
    assert normal[("rota_redis_memory_max_bytes", "")] == 0  # no limit
    fill_up(sync)
    response = await web.get("/metrics")
    assert response.status_code == 200
    full = gauges(response.text)
    assert full[("rota_redis_refusing_writes", "out_of_memory")] == 1
    assert full[("rota_redis_refusing_writes", "read_only")] == 0
    limit = full[("rota_redis_memory_max_bytes", "")]
    assert 0 < limit <= full[("rota_redis_memory_used_bytes", "")]
    assert limit == int(str(sync.config_get("maxmemory")["maxmemory"]))
    assert "rota_queue_size" in response.text  # the rest of the scrape is there
    # an evicting Redis is not refusing writes (it drops keys instead)
    sync.config_set("maxmemory-policy", "allkeys-lru")
    evicting = gauges((await web.get("/metrics")).text)
    assert evicting[("rota_redis_refusing_writes", "out_of_memory")] == 0


async def test_a_read_only_replica_refuses_actions_with_503s(
    web: httpx.AsyncClient, own: Client, sync: redis.Redis, nowhere: int
) -> None:
    queued = await own.enqueue("mail", 1)
    plant_dead(sync, "dead1")
    make_replica(sync, nowhere)
    before = snapshot(sync, NS)
    read_only = MEANING[Condition.READ_ONLY]
    for path, body in [
        ("/api/queues/mail/pause", None),
        ("/api/queues/mail/clear", None),
        ("/api/dead/retry", {"ids": ["dead1"]}),
        ("/api/dead/retry", {"all": True}),
        ("/api/dead/delete", {"ids": ["dead1"]}),
        (f"/api/jobs/{queued.id}/abort", None),
        ("/api/jobs", {"name": "mail"}),
    ]:
        response = await web.post(path, json=body) if body else await web.post(path)
        assert read_only in error_of(response, 503), path
    page = await web.post(
        "/queues/mail/pause", data={"next": "/queues"}, headers={"accept": "text/html"}
    )
    assert page.status_code == 503
    assert page.headers["content-type"].startswith("text/html")
    assert "read-only replica" in page.text
    assert snapshot(sync, NS) == before
    # reading still works, and /metrics says why writes fail
    assert (await web.get("/api/dead")).json()["total"] == 1
    metrics = gauges((await web.get("/metrics")).text)
    assert metrics[("rota_redis_refusing_writes", "read_only")] == 1
    assert metrics[("rota_redis_refusing_writes", "out_of_memory")] == 0
    sync.replicaof("NO", "ONE")
    assert (await web.post("/api/dead/retry", json={"ids": ["dead1"]})).json() == {"retried": 1}


async def test_a_real_redis_error_stays_a_500(web: httpx.AsyncClient, sync: redis.Redis) -> None:
    sync.set("{" + NS + "}:names", "not a set")  # WRONGTYPE: a bug, not a condition
    response = await web.get("/api/queues")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error: see the server's log"}


async def test_metrics_without_info_leave_the_redis_gauges_out(
    server: RedisServer, sync: redis.Redis
) -> None:
    sync.acl_setuser(
        "scraper",
        enabled=True,
        passwords=["+secret"],
        keys=["*"],
        channels=["*"],
        categories=["+@all"],
        commands=["-info"],
    )
    url = f"redis://scraper:secret@127.0.0.1:{server.port}/0"
    async with Client.from_url(url, NS) as scraper:
        await scraper.enqueue("mail", 1)
        app = create_app(pool_settings(url, NS), client=scraper)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as web:
            response = await web.get("/metrics")
    assert response.status_code == 200
    names = {f.name for f in text_string_to_metric_families(response.text)}
    assert "rota_queue_size" in names
    assert "rota_redis_roundtrip_seconds" in names
    assert not names & {
        "rota_redis_refusing_writes",
        "rota_redis_memory_used_bytes",
        "rota_redis_memory_max_bytes",
    }
