"""The JSON API over HTTP (ASGI transport) against the real Redis: every endpoint, every
action, and refusals that change nothing."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from rota import Client
from rota.web import create_app
from tests.helpers import namespace_keys, pool_settings, wait_until
from tests.web.conftest import BASE
from tests.web.live import SCRIPT, Seeded, example_pool


def snapshot(r: redis.Redis, namespace: str) -> dict[str, bytes | None]:
    """Every key of the namespace with its serialized value."""
    return {k: r.dump(k) for k in sorted(namespace_keys(r, namespace))}


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    return str(body["error"])


async def test_dashboard(http: httpx.AsyncClient, seeded: Seeded) -> None:
    data = (await http.get("/api/dashboard")).json()
    assert data["totals"]["processed"] == 5
    assert data["totals"]["failed"] == 8  # 6 dead, 2 retries
    assert data["totals"]["dead"] == 6
    assert data["sizes"] == {
        "queued": 0,
        "running": 0,
        "scheduled": 2,
        "retry": 2,
        "dead": 6,
        "waiting": 0,
        "pools": 0,
        "busy": 0,
    }
    assert len(data["minutes"]) == 60 and len(data["days"]) == 30
    # the jobs ran in the last minute or two, today
    assert sum(b["processed"] for b in data["minutes"][-2:]) == 5
    assert sum(b["processed"] for b in data["days"][-2:]) == 5  # today (or across midnight)
    assert sum(b["failed"] for b in data["days"][-2:]) == 8
    assert data["minutes"][-1]["start"] <= time.time() * 1000 < data["minutes"][-1]["start"] + 60e3
    short = (await http.get("/api/dashboard", params={"minutes": 5, "days": 2})).json()
    assert (len(short["minutes"]), len(short["days"])) == (5, 2)
    for bad in ({"minutes": 0}, {"days": 91}, {"minutes": "x"}):
        error_of(await http.get("/api/dashboard", params=bad), 400)


async def test_queues(http: httpx.AsyncClient, client: Client) -> None:
    for i in range(3):
        await client.enqueue("mail", i)
    await client.admin.set_limit("mail", 4)
    await client.admin.pause("mail")
    await anyio.sleep(0.01)
    queues = (await http.get("/api/queues")).json()["queues"]
    assert len(queues) == 1
    q = queues[0]
    assert (q["name"], q["size"], q["running"], q["limit"], q["paused"]) == ("mail", 3, 0, 4, True)
    assert q["latency"] > 0


async def test_queue_actions(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    for i in range(3):
        await client.enqueue("mail", i)
    response = await http.post("/api/queues/mail/pause")
    assert response.json() == {"name": "mail", "paused": True}
    assert (await client.admin.queues())[0].paused
    response = await http.post("/api/queues/mail/resume")
    assert response.json() == {"name": "mail", "paused": False}
    assert not (await client.admin.queues())[0].paused
    before = snapshot(redis_sync, namespace)
    for path in (
        "/api/queues/nosuch/pause",
        "/api/queues/nosuch/clear",
        "/api/queues/bad%20name/pause",
        "/api/queues/" + "x" * 200 + "/resume",
    ):
        error_of(await http.post(path), 404)
    error_of(await http.get("/api/queues/mail/pause"), 405)
    assert snapshot(redis_sync, namespace) == before
    response = await http.post("/api/queues/mail/clear")
    assert response.json() == {"name": "mail", "deleted": 3}
    assert (await client.admin.queues())[0].size == 0


async def test_pools_and_busy_workers(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    assert (await http.get("/api/pools")).json()["pools"] == []
    assert (await http.get("/api/busy")).json() == {"workers": []}
    pool = example_pool(redis_url, namespace, heartbeat_interval=0.5, lease=5.0)
    pools_key = "{" + namespace + "}:pools"
    job = await client.enqueue("slow", seconds=30)
    async with pool.running():

        async def busy() -> list[dict[str, Any]]:
            workers: list[dict[str, Any]] = (await http.get("/api/busy")).json()["workers"]
            return workers

        await wait_until(lambda: _has_checkin(busy), within=10)
        (worker,) = await busy()
        assert (worker["job_id"], worker["name"]) == (job.id, "slow")
        assert worker["message"].startswith("step ")
        assert worker["since"] <= time.time() * 1000
        # it checks in every 0.2 s: heard from since its start, silent for a heartbeat or so
        assert worker["since"] <= worker["heard_at"] <= time.time() * 1000
        assert 0 <= worker["silent"] < 2
        page = (await http.get("/busy")).text
        assert '<td data-label="Silent"' in page and job.id in page

        # its snapshot lives three heartbeats (1.5 s here): on a loaded host a late beat
        # lets it expire, and the pool is not listed until its next beat writes it again
        seen: list[dict[str, Any]] = []

        async def listed() -> bool:
            seen[:] = (await http.get("/api/pools")).json()["pools"]
            return len(seen) == 1

        await wait_until(listed, within=10)
        (p,) = seen
        assert p["stale"] is False
        assert p["concurrency"] == 10
        assert set(p["jobs"]) >= {"ok", "boom", "slow"}
        assert p["busy"] == 1

        # a pool whose last heartbeat is older than two intervals (the web's settings say
        # 5 s) is flagged; its own next heartbeat may undo the change, and its reaper may
        # take the pool for gone (older than its lease) until that heartbeat: try again
        async def looks_stale() -> bool:
            redis_sync.zadd(pools_key, {p["id"]: int(time.time() * 1000) - 11_000})
            rows = (await http.get("/api/pools")).json()["pools"]
            assert [row["id"] for row in rows] in ([], [p["id"]])
            return bool(rows and rows[0]["stale"])

        await wait_until(looks_stale, within=5, every=0.05)
        await client.abort(job.id)


async def _has_checkin(busy: Any) -> bool:
    workers = await busy()
    return len(workers) == 1 and workers[0]["message"] != ""


async def test_job_sets_and_search(http: httpx.AsyncClient, seeded: Seeded) -> None:
    dead = (await http.get("/api/dead")).json()
    assert (dead["set"], dead["total"], dead["offset"]) == ("dead", 6, 0)
    assert {j["id"] for j in dead["jobs"]} == set(seeded.dead + seeded.flaky)
    retry = (await http.get("/api/retry")).json()
    assert {j["id"] for j in retry["jobs"]} == set(seeded.retry)
    assert all(j["state"] == "retry" for j in retry["jobs"])
    scheduled = (await http.get("/api/scheduled")).json()
    assert {j["id"] for j in scheduled["jobs"]} == set(seeded.scheduled)
    page = (await http.get("/api/dead", params={"offset": 2, "limit": 3})).json()
    assert (page["total"], page["offset"], page["limit"], len(page["jobs"])) == (6, 2, 3, 3)
    by_name = (await http.get("/api/dead", params={"q": "FLAKY"})).json()
    assert {j["id"] for j in by_name["jobs"]} == set(seeded.flaky)
    assert by_name["searched"] == 6
    by_id = (await http.get("/api/dead", params={"q": seeded.script[:10]})).json()
    assert [j["id"] for j in by_id["jobs"]] == [seeded.script]
    assert SCRIPT in by_id["jobs"][0]["args"]
    assert (await http.get("/api/dead", params={"q": "nothing-like-it"})).json()["total"] == 0
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": 501}, {"offset": "x"}, {"q": "x" * 201}):
        error_of(await http.get("/api/dead", params=bad), 400)


async def test_job_detail(http: httpx.AsyncClient, seeded: Seeded) -> None:
    job = (await http.get(f"/api/jobs/{seeded.complete[3]}")).json()
    assert (job["name"], job["state"], job["attempts"]) == ("ok", "complete", 1)
    assert job["args"] == {"n": 3}
    assert job["result"] == {"n": 3}
    assert job["logs"] == ["working on 3"]
    assert job["progress"] == {"percent": 100.0, "message": "all done"}
    assert job["enqueued_at"] <= job["started_at"] <= job["finished_at"]
    dead = (await http.get(f"/api/jobs/{seeded.script}")).json()
    assert (dead["state"], dead["reason"], dead["failures"]) == ("dead", "error", 1)
    assert dead["args"] == {"note": SCRIPT}
    assert dead["error"].startswith("ValueError: broke on <script>")
    error_of(await http.get("/api/jobs/nosuchjob"), 404)
    error_of(await http.get("/api/jobs/" + "z" * 300), 404)


async def test_set_actions(
    http: httpx.AsyncClient,
    client: Client,
    seeded: Seeded,
    redis_sync: redis.Redis,
    namespace: str,
) -> None:
    one = seeded.dead[1]
    response = await http.post("/api/dead/retry", json={"ids": [one]})
    assert response.json() == {"retried": 1}
    record = await client.job(one)
    assert record is not None and record.state == "queued"
    response = await http.post("/api/dead/delete", json={"ids": [seeded.dead[2]]})
    assert response.json() == {"deleted": 1}
    assert await client.job(seeded.dead[2]) is None
    response = await http.post("/api/retry/retry", json={"ids": seeded.retry})
    assert response.json() == {"retried": 2}
    response = await http.post("/api/scheduled/delete", json={"all": True})
    assert response.json() == {"deleted": 2}
    assert (await client.admin.page("scheduled")).total == 0
    response = await http.post("/api/dead/retry", json={"all": True})
    assert response.json() == {"retried": 4}
    assert (await client.admin.page("dead")).total == 0


async def test_set_actions_refused_change_nothing(
    http: httpx.AsyncClient, seeded: Seeded, redis_sync: redis.Redis, namespace: str
) -> None:
    before = snapshot(redis_sync, namespace)
    good = seeded.dead[0]
    cases: list[tuple[str, dict[str, Any], int]] = [
        ("/api/dead/retry", {"json": {"ids": ["nosuch"]}}, 404),
        ("/api/dead/delete", {"json": {"ids": [good, "nosuch"]}}, 404),
        ("/api/retry/retry", {"json": {"ids": [good]}}, 404),  # dead, not in retry
        ("/api/scheduled/delete", {"json": {"ids": [seeded.retry[0]]}}, 404),
        ("/api/dead/retry", {"content": b"{not json", "headers": _JSON}, 400),
        ("/api/dead/retry", {"content": b"", "headers": _JSON}, 400),
        ("/api/dead/retry", {"data": {"ids": good}}, 415),
        ("/api/dead/retry", {"json": {}}, 422),
        ("/api/dead/retry", {"json": {"ids": []}}, 422),
        ("/api/dead/retry", {"json": {"ids": good}}, 422),
        ("/api/dead/retry", {"json": {"ids": [1, 2]}}, 422),
        ("/api/dead/delete", {"json": {"all": False}}, 422),
        ("/api/dead/delete", {"json": {"all": True, "ids": [good]}}, 422),
        ("/api/dead/delete", {"json": {"ids": [good], "extra": 1}}, 422),
        ("/api/dead/delete", {"json": [good]}, 422),
        ("/api/dead/delete", {"json": {"ids": [good] * 1001}}, 422),
    ]
    for path, kwargs, status in cases:
        error_of(await http.post(path, **kwargs), status)
    assert snapshot(redis_sync, namespace) == before


_JSON = {"content-type": "application/json"}


async def test_abort(http: httpx.AsyncClient, client: Client) -> None:
    job = await client.enqueue("mail", 1)
    response = await http.post(f"/api/jobs/{job.id}/abort")
    assert response.json() == {"id": job.id, "was": "queued"}
    record = await client.job(job.id)
    assert record is not None and record.state == "aborted"
    error_of(await http.post("/api/jobs/nosuch/abort"), 404)


async def test_enqueue(http: httpx.AsyncClient, client: Client) -> None:
    response = await http.post("/api/jobs", json={"name": "mail", "args": [1, "two", {"3": [4]}]})
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["created"]) == ("mail", True)
    record = await client.job(body["id"])
    assert record is not None
    assert (record.state, record.args_value) == ("queued", [1, "two", {"3": [4]}])

    body = (await http.post("/api/jobs", json={"name": "mail", "kwargs": {"to": "a"}})).json()
    record = await client.job(body["id"])
    assert record is not None and record.args_value == {"to": "a"}

    body = (await http.post("/api/jobs", json={"name": "mail", "fair_key": "tenant-9"})).json()
    record = await client.job(body["id"])
    assert record is not None and record.fair_key == "tenant-9"
    error_of(await http.post("/api/jobs", json={"name": "mail", "fair_key": "a b"}), 422)

    body = (await http.post("/api/jobs", json={"name": "mail", "delay": 600})).json()
    record = await client.job(body["id"])
    assert record is not None and record.state == "scheduled"
    assert record.run_at is not None and abs(record.run_at - time.time() - 600) < 30

    at = {"name": "mail", "run_at": "2031-01-02T03:04:05Z", "max_fails": 2, "timeout": 5}
    body = (await http.post("/api/jobs", json=at)).json()
    record = await client.job(body["id"])
    assert record is not None
    assert (record.run_at, record.max_fails, record.timeout) == (1925089445, 2, 5.0)
    body = (await http.post("/api/jobs", json={"name": "mail", "run_at": 1925089445.5})).json()
    record = await client.job(body["id"])
    assert record is not None and record.run_at == 1925089445.5

    first = await http.post("/api/jobs", json={"name": "mail", "unique": "u1"})
    second = await http.post("/api/jobs", json={"name": "mail", "unique": "u1"})
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json() == {"id": first.json()["id"], "name": "mail", "created": False}

    # A caller-chosen id, as the Python client takes one: a retry enqueues nothing.
    mine = {"name": "mail", "job_id": "order-42-mail"}
    first, again = [await http.post("/api/jobs", json=mine) for _ in range(2)]
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {"id": "order-42-mail", "name": "mail", "created": False}
    bad = await http.post("/api/jobs", json={"name": "mail", "job_id": "has space"})
    assert bad.status_code == 422 and "invalid job id" in bad.json()["error"]


async def test_enqueue_refused_changes_nothing(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    small = Client.from_url(redis_url, namespace, max_args_bytes=1000)
    app = create_app(pool_settings(redis_url, namespace), client=small)
    await client.enqueue("mail", 0)
    before = snapshot(redis_sync, namespace)
    bad: list[tuple[dict[str, Any], int]] = [
        ({"json": {}}, 422),
        ({"json": {"name": "bad name"}}, 422),
        ({"json": {"name": ""}}, 422),
        ({"json": {"name": 5}}, 422),
        ({"json": {"name": "mail", "args": [1], "kwargs": {"a": 1}}}, 422),
        ({"json": {"name": "mail", "args": {"a": 1}}}, 422),
        ({"json": {"name": "mail", "delay": 1, "run_at": 2}}, 422),
        ({"json": {"name": "mail", "delay": -1}}, 422),
        ({"json": {"name": "mail", "delay": 1e300}}, 422),
        ({"json": {"name": "mail", "run_at": "tomorrow"}}, 422),
        ({"json": {"name": "mail", "run_at": -5}}, 422),
        ({"json": {"name": "mail", "max_fails": 0}}, 422),
        ({"json": {"name": "mail", "timeout": 0}}, 422),
        ({"json": {"name": "mail", "unique": ""}}, 422),
        ({"json": {"name": "mail", "priority": 3}}, 422),
        ({"json": ["mail"]}, 422),
        ({"json": {"name": "mail", "args": ["x" * 2000]}}, 413),
        ({"content": b'{"name": "mail", ', "headers": _JSON}, 400),
        ({"content": b'{"name": "mail"}', "headers": {"content-type": "text/plain"}}, 415),
    ]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        for kwargs, status in bad:
            error_of(await http.post("/api/jobs", **kwargs), status)
    await small.close()
    assert snapshot(redis_sync, namespace) == before


async def test_redis_info(http: httpx.AsyncClient, redis_sync: redis.Redis) -> None:
    data = (await http.get("/api/redis")).json()
    info = redis_sync.info()
    assert str(data["info"]["redis_version"]) == str(info["redis_version"])
    assert data["info"]["connected_clients"] >= 1
    assert data["info"]["used_memory"] > 0
    assert "instantaneous_ops_per_sec" in data["info"]
    assert 0 < data["ping_ms"] < 1000


async def test_metrics(http: httpx.AsyncClient, client: Client, seeded: Seeded) -> None:
    for i in range(4):
        await client.enqueue("mail", i)
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}

    def value(metric: str, **labels: str) -> float:
        for s in families[metric].samples:
            if all(s.labels.get(k) == v for k, v in labels.items()) and s.name.endswith(
                ("_total", metric)
            ):
                return float(s.value)
        raise AssertionError(f"no {metric} {labels}")

    assert value("rota_queue_size", name="mail") == 4
    assert value("rota_queue_latency_seconds", name="mail") >= 0
    assert value("rota_queue_running", name="ok") == 0
    assert value("rota_jobs_processed", name="ok") == 5
    assert value("rota_jobs_failed", name="boom") == 4
    assert value("rota_jobs_dead", name="flaky") == 2
    assert value("rota_jobs_in_set", set="dead") == 6
    assert value("rota_pools") == 0
    assert value("rota_busy_workers") == 0
    assert 0 < value("rota_redis_roundtrip_seconds") < 1


async def test_health_openapi_and_unknown_routes(http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).json() == {"ok": True}
    document = (await http.get("/api/openapi.json")).json()
    assert document["openapi"].startswith("3.")
    error_of(await http.get("/api/nothing-here"), 404)
    error_of(await http.post("/api/queues"), 405)


@pytest.mark.parametrize("path", ["/", "/queues", "/pools", "/busy", "/dead", "/redis"])
async def test_pages_render(http: httpx.AsyncClient, seeded: Seeded, path: str) -> None:
    response = await http.get(path, headers={"accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<script>alert" not in response.text


async def test_busy_is_exact_between_heartbeats(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    """Three jobs started after the pool's first snapshot show as busy at once: the list
    comes from the running sets, not from snapshots a heartbeat old."""
    pool = example_pool(redis_url, namespace, heartbeat_interval=60.0, lease=120.0)
    async with pool.running():
        await wait_until(lambda: _pool_count(http), within=10)
        jobs = [await client.enqueue("slow", seconds=30) for _ in range(3)]
        await wait_until(lambda: _running(client, 3), within=10)
        workers = (await http.get("/api/busy")).json()["workers"]
        assert sorted(w["job_id"] for w in workers) == sorted(j.id for j in jobs)
        assert {w["name"] for w in workers} == {"slow"}
        assert all(w["deadline"] > w["since"] > 0 for w in workers)
        # started after the pool's only snapshot: silent since their start, as it tells
        assert all(w["heard_at"] == w["since"] for w in workers)
        # the Python API has the same times in seconds, the JSON in ms (a lease may have
        # been extended between the two reads)
        running = {r.job_id: r for r in await client.admin.running()}
        for w in workers:
            r = running[w["job_id"]]
            assert (w["since"], abs(r.since - time.time()) < 60) == (round(r.since * 1000), True)
            assert round(r.deadline * 1000) >= w["deadline"]
        (p,) = (await http.get("/api/pools")).json()["pools"]
        (live,) = await client.admin.pools()
        for key in ("started_at", "heartbeat_at", "last_heartbeat"):
            assert p[key] == round(getattr(live, key) * 1000), key
        assert abs(live.last_heartbeat - time.time()) < 60
        assert p["busy"] == 3 and all(w["pool"] == p["id"] for w in workers)
        assert (await http.get("/api/dashboard")).json()["sizes"]["busy"] == 3
        for job in jobs:
            await client.abort(job.id)


async def _pool_count(http: httpx.AsyncClient) -> bool:
    return len((await http.get("/api/pools")).json()["pools"]) == 1


async def _running(client: Client, n: int) -> bool:
    return sum(q.running for q in await client.admin.queues()) == n


async def test_set_a_rate_and_a_limit_by_the_api(http: httpx.AsyncClient, client: Client) -> None:
    await client.enqueue("mail", 1)
    answer = await http.post("/api/queues/mail/rate", json={"rate": "50/s"})
    assert answer.json() == {"name": "mail", "rate": "50/s"}
    answer = await http.post("/api/queues/mail/limit", json={"limit": 3})
    assert answer.json() == {"name": "mail", "limit": 3}
    (q,) = (await http.get("/api/queues")).json()["queues"]
    assert (q["rate"], q["limit"], q["done_per_second"]) == ("50/s", 3, 0)
    error_of(await http.post("/api/queues/mail/rate", json={"rate": "often"}), 422)
    error_of(await http.post("/api/queues/mail/limit", json={"limit": 0}), 422)
    error_of(await http.post("/api/queues/nope/rate", json={"rate": "1/s"}), 404)
    await http.post("/api/queues/mail/rate", json={"rate": None})
    await http.post("/api/queues/mail/limit", json={"limit": None})
    (info,) = await client.admin.queues(["mail"])
    assert (info.rate, info.limit) == (None, None)


@pytest.mark.parametrize("heard_at", [-(2**63), 2**64 - 1, "soon", 1.5e300])
async def test_busy_survives_a_snapshot_with_a_bad_heard_at(
    http: httpx.AsyncClient,
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    heard_at: Any,
) -> None:
    """A pool snapshot is written by another process: a heard_at out of any range (or of
    another type) shows on the busy page and its API as a finite silence, never a 500."""
    pool = example_pool(redis_url, namespace, heartbeat_interval=60.0, lease=120.0)
    async with pool.running():
        await wait_until(lambda: _pool_count(http), within=10)
        job = await client.enqueue("slow", seconds=30)
        await wait_until(lambda: _running(client, 1), within=10)
        (p,) = (await http.get("/api/pools")).json()["pools"]
        key = "{" + namespace + "}:pool:" + p["id"]
        snapshot = json.loads(redis_sync.get(key) or b"{}")
        snapshot["busy"] = [{"job_id": job.id, "name": "slow", "since": 1, "heard_at": heard_at}]
        redis_sync.set(key, json.dumps(snapshot), keepttl=True)
        answer = await http.get("/api/busy")
        assert answer.status_code == 200
        (worker,) = answer.json()["workers"]
        assert worker["job_id"] == job.id and 0 <= worker["silent"] < 1e17
        page = await http.get("/busy", headers={"accept": "text/html"})
        assert page.status_code == 200 and job.id in page.text
        await client.abort(job.id)
