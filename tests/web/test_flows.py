"""Workflows in the JSON API and the pages, against the real Redis: ``after`` on enqueue,
parents and children of a job, groups, flow graphs and the waiting set, before and
after a pool runs the jobs."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from rota import Client, JobSpec
from tests.helpers import step_pool, wait_until
from tests.web.test_api import error_of, snapshot
from tests.web.test_pages import FORM


def step(label: str, **options: Any) -> JobSpec:
    return JobSpec(name="step", kwargs={"label": label}, **options)


async def _states(client: Client, ids: list[str]) -> dict[str, str]:
    out = {}
    for job_id in ids:
        record = await client.job(job_id)
        out[job_id] = record.state if record else "missing"
    return out


async def _all(client: Client, ids: list[str], state: str) -> bool:
    return set((await _states(client, ids)).values()) == {state}


def _rels(items: list[dict[str, Any]]) -> dict[str, tuple[str | None, str]]:
    return {r["id"]: (r["name"], r["state"]) for r in items}


def _edges(flow: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(e["from"], e["to"], e["kind"]) for e in flow["edges"]}


async def _metric(http: httpx.AsyncClient, which: str) -> float:
    text = (await http.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        if family.name == "rota_jobs_in_set":
            for s in family.samples:
                if s.labels["set"] == which:
                    return float(s.value)
    raise AssertionError(f"no rota_jobs_in_set{{set={which!r}}}")


@pytest.mark.one_shard("a unique key and parents may name different shards")
async def test_enqueue_after(http: httpx.AsyncClient, client: Client) -> None:
    first = (await http.post("/api/jobs", json={"name": "step", "kwargs": {"label": "a"}})).json()
    response = await http.post(
        "/api/jobs", json={"name": "step", "kwargs": {"label": "b"}, "after": [first["id"]]}
    )
    assert response.status_code == 201
    record = await client.job(response.json()["id"])
    assert record is not None
    assert (record.state, record.after, record.pending) == ("waiting", (first["id"],), 1)
    later = await http.post(
        "/api/jobs", json={"name": "step", "after": [first["id"]], "delay": 600, "unique": "u"}
    )
    record = await client.job(later.json()["id"])
    assert record is not None and record.state == "waiting" and record.run_at is not None
    assert (await client.admin.job_set_sizes())["waiting"] == 2
    empty = await http.post("/api/jobs", json={"name": "step", "after": []})
    record = await client.job(empty.json()["id"])
    assert record is not None and record.state == "queued"


@pytest.mark.one_shard("a parent that does not exist names a shard of its own")
async def test_enqueue_after_a_missing_parent_is_a_422_that_writes_nothing(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    parent = await client.enqueue("step", label="p")
    before = snapshot(redis_sync, namespace)
    message = error_of(
        await http.post("/api/jobs", json={"name": "step", "after": [parent.id, "nope"]}), 422
    )
    assert re.match(r"parent nope of job \w+ does not exist", message), message
    bad: list[Any] = [
        parent.id,  # one string, not a list
        [1, 2],
        [""],
        ["has space"],
        ["x" * 129],
        [parent.id] * 1001,
    ]
    for after in bad:
        error_of(await http.post("/api/jobs", json={"name": "step", "after": after}), 422)
    assert snapshot(redis_sync, namespace) == before


async def test_a_diamond_in_the_api_before_and_after_a_pool_runs_it(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    await anyio.sleep(0.003)  # children are listed in the order enqueued (in ms)
    c = await client.enqueue("step", label="c", after=[a.id])
    d = await client.enqueue("step", label="d", after=[b.id, c.id])

    job_b = (await http.get(f"/api/jobs/{b.id}")).json()
    assert job_b["parents"] == [{"id": a.id, "name": "step", "state": "queued"}]
    assert job_b["children"] == [{"id": d.id, "name": "step", "state": "waiting"}]
    assert (job_b["state"], job_b["after"], job_b["pending"]) == ("waiting", [a.id], 1)
    assert (job_b["group"], job_b["waits_group"], job_b["callback"]) == (None, None, None)
    job_a = (await http.get(f"/api/jobs/{a.id}")).json()
    assert job_a["parents"] == []
    assert [r["id"] for r in job_a["children"]] == [b.id, c.id]  # in the order enqueued
    assert job_a["children_total"] == 2
    job_d = (await http.get(f"/api/jobs/{d.id}")).json()
    assert [r["id"] for r in job_d["parents"]] == [b.id, c.id]  # in the order of after=

    diamond = {(a.id, b.id, "after"), (a.id, c.id, "after"), (b.id, d.id, "after")}
    diamond.add((c.id, d.id, "after"))
    for start in (a.id, b.id, c.id, d.id):  # the whole flow, from any of its jobs
        flow = (await http.get(f"/api/flows/{start}")).json()
        assert flow["id"] == start and flow["nodes"][0]["id"] == start
        assert _rels(flow["nodes"]) == {
            a.id: ("step", "queued"),
            b.id: ("step", "waiting"),
            c.id: ("step", "waiting"),
            d.id: ("step", "waiting"),
        }
        assert _edges(flow) == diamond
        assert (flow["truncated"], flow["limit"]) == (False, 200)

    waiting = (await http.get("/api/waiting")).json()
    assert (waiting["set"], waiting["total"]) == ("waiting", 3)
    assert {j["id"] for j in waiting["jobs"]} == {b.id, c.id, d.id}
    row = next(j for j in waiting["jobs"] if j["id"] == d.id)
    assert (row["after"], row["pending"]) == ([b.id, c.id], 2)
    assert (await http.get("/api/dashboard")).json()["sizes"]["waiting"] == 3
    assert await _metric(http, "waiting") == 3

    async with step_pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: _all(client, [a.id, b.id, c.id, d.id], "complete"))

    job_b = (await http.get(f"/api/jobs/{b.id}")).json()
    assert job_b["parents"] == [{"id": a.id, "name": "step", "state": "complete"}]
    assert job_b["children"] == [{"id": d.id, "name": "step", "state": "complete"}]
    flow = (await http.get(f"/api/flows/{d.id}")).json()
    assert {n["state"] for n in flow["nodes"]} == {"complete"}
    assert _edges(flow) == diamond
    assert (await http.get("/api/waiting")).json()["total"] == 0
    assert (await http.get("/api/dashboard")).json()["sizes"]["waiting"] == 0
    assert await _metric(http, "waiting") == 0

    # a parent whose record is gone (expired) is still named, as missing
    redis_sync.delete((await client.admin.shard_holding(a.id)).keys.job(a.id))
    job_b = (await http.get(f"/api/jobs/{b.id}")).json()
    assert job_b["parents"] == [{"id": a.id, "name": None, "state": "missing"}]
    flow = (await http.get(f"/api/flows/{b.id}")).json()
    assert _rels(flow["nodes"])[a.id] == (None, "missing")
    assert _edges(flow) >= {(a.id, b.id, "after")}
    assert c.id in _rels(flow["nodes"])  # reached through d
    error_of(await http.get(f"/api/flows/{a.id}"), 404)
    error_of(await http.get("/api/flows/nosuch"), 404)


async def test_a_dead_parent_shows_in_its_childrens_flow(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    a = await client.enqueue("step", label="fail-a")
    b = await client.enqueue("step", label="b", after=[a.id])
    async with step_pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: _all(client, [a.id, b.id], "dead"))
    job_b = (await http.get(f"/api/jobs/{b.id}")).json()
    assert (job_b["state"], job_b["reason"]) == ("dead", "dependency_failed")
    assert job_b["parents"] == [{"id": a.id, "name": "step", "state": "dead"}]
    flow = (await http.get(f"/api/flows/{b.id}")).json()
    assert _rels(flow["nodes"]) == {a.id: ("step", "dead"), b.id: ("step", "dead")}


async def test_a_group_in_the_api_before_and_after_a_pool_runs_it(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    g = await client.group([step(f"m{i}") for i in range(3)] + [step("fail-m3")], then=step("cb"))
    assert g.then is not None
    members = [j.id for j in g.jobs]

    data = (await http.get(f"/api/groups/{g.id}")).json()
    assert (data["id"], data["total"], data["done"], data["failed"]) == (g.id, 4, 0, 0)
    assert data["finished"] is False
    # ms since the epoch, as the group's hash holds it and GroupProgress carries it
    assert abs(data["created_at"] / 1000 - time.time()) < 60
    created = (await client.group_progress(g.id)).created_at  # seconds in Python
    assert created is not None and data["created_at"] == round(created * 1000)
    assert data["then"] == {"id": g.then.id, "name": "step", "state": "waiting"}
    assert [m["id"] for m in data["members"]] == members
    assert {m["state"] for m in data["members"]} == {"queued"}
    assert (data["offset"], data["limit"]) == (0, 100)
    page = (await http.get(f"/api/groups/{g.id}", params={"offset": 1, "limit": 2})).json()
    assert [m["id"] for m in page["members"]] == members[1:3]
    assert (page["offset"], page["limit"], page["total"]) == (1, 2, 4)

    member = (await http.get(f"/api/jobs/{members[0]}")).json()
    assert (member["group"], member["waits_group"]) == (g.id, None)
    assert member["callback"] == {"id": g.then.id, "name": "step", "state": "waiting"}
    assert member["group_progress"]["then"] == g.then.id
    callback = (await http.get(f"/api/jobs/{g.then.id}")).json()
    assert (callback["group"], callback["waits_group"], callback["parents"]) == (None, g.id, [])
    assert callback["group_progress"] == {
        "id": g.id,
        "total": 4,
        "done": 0,
        "failed": 0,
        "sent": 4,
        "finished": False,
        "then": g.then.id,
        "created_at": data["created_at"],
    }
    for start in (g.then.id, members[2]):
        flow = (await http.get(f"/api/flows/{start}")).json()
        assert set(_rels(flow["nodes"])) == {*members, g.then.id}
        assert _edges(flow) == {(m, g.then.id, "group") for m in members}

    then_id = g.then.id
    async with step_pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: _all(client, [then_id], "dead"))
        await wait_until(lambda: _all(client, members[:3], "complete"))

    data = (await http.get(f"/api/groups/{g.id}")).json()
    assert (data["total"], data["done"], data["failed"], data["finished"]) == (4, 3, 1, True)
    assert data["then"]["state"] == "dead"
    assert [m["state"] for m in data["members"]] == ["complete"] * 3 + ["dead"]
    progress = await client.group_progress(g.id)
    assert (progress.done, progress.failed) == (data["done"], data["failed"])
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": 1001}, {"offset": "x"}):
        error_of(await http.get(f"/api/groups/{g.id}", params=bad), 400)
    error_of(await http.get("/api/groups/nosuch"), 404)


async def test_a_big_flow_is_cut_and_says_so(http: httpx.AsyncClient, client: Client) -> None:
    g = await client.group([step(f"m{i}") for i in range(250)], then=step("cb"))
    assert g.then is not None
    flow = (await http.get(f"/api/flows/{g.then.id}")).json()
    assert (len(flow["nodes"]), flow["truncated"]) == (200, True)
    assert flow["nodes"][0]["id"] == g.then.id
    ids = {n["id"] for n in flow["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids for e in flow["edges"])
    assert len(flow["edges"]) == 199
    chain = await client.chain([step(f"s{i}") for i in range(5)])
    flow = (await http.get(f"/api/flows/{chain[2].id}")).json()
    assert (len(flow["nodes"]), flow["truncated"]) == (5, False)


async def test_waiting_jobs_are_deleted_never_retried(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    c = await client.enqueue("step", label="c", after=[a.id])
    before = snapshot(redis_sync, namespace)
    for path, body in (
        ("/api/waiting/retry", {"ids": [b.id]}),
        ("/api/waiting/delete", {"ids": [a.id]}),  # queued, not waiting
        ("/api/waiting/delete", {"ids": [b.id, "nosuch"]}),
    ):
        assert (await http.post(path, json=body)).status_code == 404
    for path in (f"/waiting/{b.id}/retry", "/waiting/retry-all", f"/waiting/{a.id}/delete"):
        page = await http.post(path, data={"next": "/waiting"}, headers=FORM)
        assert page.status_code in (404, 405), path
    assert snapshot(redis_sync, namespace) == before
    assert (await http.post("/api/waiting/delete", json={"ids": [b.id]})).json() == {"deleted": 1}
    assert await client.job(b.id) is None
    done = await http.post(f"/waiting/{c.id}/delete", data={"next": "/waiting"}, headers=FORM)
    assert done.headers["location"] == "/waiting?done=deleted&n=1"
    assert (await client.admin.job_set_sizes())["waiting"] == 0


async def test_pages(http: httpx.AsyncClient, client: Client) -> None:
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    g = await client.group([step("m0"), step("m1")], then=step("cb"))
    assert g.then is not None

    page = (await http.get("/", headers=FORM)).text
    assert 'href="/waiting"' in page and 'data-key="waiting"' in page
    page = (await http.get("/waiting", headers=FORM)).text
    assert "Waiting jobs" in page and b.id[:12] in page and f'href="/flows/{b.id}"' in page
    assert f'action="/waiting/{b.id}/delete"' in page
    assert "/retry" not in page.split("<main>")[1]  # no retry button for waiting jobs

    page = (await http.get(f"/jobs/{b.id}", headers=FORM)).text
    assert f'href="/jobs/{a.id}"' in page and f'href="/flows/{b.id}"' in page
    assert f'action="/waiting/{b.id}/delete"' in page and "Retry now" not in page
    page = (await http.get(f"/jobs/{a.id}", headers=FORM)).text
    assert f'href="/jobs/{b.id}"' in page
    page = (await http.get(f"/jobs/{g.jobs[0].id}", headers=FORM)).text
    assert f'href="/groups/{g.id}"' in page and f'href="/jobs/{g.then.id}"' in page

    page = (await http.get(f"/flows/{b.id}", headers=FORM)).text
    assert page.count('class="node st-') == 2
    assert f'<a href="/jobs/{a.id}" class="node st-queued"' in page
    assert f'<a href="/jobs/{b.id}" class="node st-waiting focus"' in page

    page = (await http.get(f"/groups/{g.id}", headers=FORM)).text
    assert page.count('class="node st-') == 3
    assert page.count('class="edge group"') == 2
    assert f'href="/jobs/{g.then.id}"' in page
    for path in ("/flows/nosuch", "/groups/nosuch"):
        assert (await http.get(path, headers=FORM)).status_code == 404


@pytest.mark.parametrize("path", ["/waiting"])
async def test_waiting_page_renders_empty(http: httpx.AsyncClient, path: str) -> None:
    response = await http.get(path, headers=FORM)
    assert response.status_code == 200 and "None." in response.text


async def test_the_group_page_says_what_a_dead_member_means(
    http: httpx.AsyncClient, client: Client
) -> None:
    """It said "running" beside a dead callback while other members had still to run."""
    g = await client.group([step(f"m{i}") for i in range(3)], then=step("after"), group_id="gd")
    shard = await client.admin.shard_holding(g.jobs[0].id)  # a group's shard is its members'
    await shard.redis.hincrby(shard.keys.group(g.id), "failed", 1)  # as a dead member does
    page = await http.get(f"/groups/{g.id}", headers=FORM)
    state = re.search(r'id="group-state">([^<]*)<', page.text)
    assert state is not None and "the callback will not run" in state.group(1)
    assert "running" not in state.group(1)
    await shard.redis.hset(shard.keys.group(g.id), "sent", 2)
    page = await http.get(f"/groups/{g.id}", headers=FORM)
    assert 'id="group-state">incomplete' in page.text


async def test_a_dead_member_past_the_first_page_is_listed(
    http: httpx.AsyncClient, client: Client
) -> None:
    """A dead member on page 2 was found only by paging: the group lists its dead and
    aborted members wherever they are."""
    g = await client.group([step(f"m{i}") for i in range(150)], then=step("after"))
    dead = g.jobs[130].id
    shard = await client.admin.shard_holding(dead)  # a group's shard is its members'
    await shard.redis.hset(shard.keys.job(dead), "state", "dead")
    await shard.redis.hincrby(shard.keys.group(g.id), "failed", 1)
    data = (await http.get(f"/api/groups/{g.id}", params={"limit": 100})).json()
    assert dead not in [m["id"] for m in data["members"]]
    assert [m["id"] for m in data["failed_members"]] == [dead]
    page = await http.get(f"/groups/{g.id}", headers=FORM)
    assert 'id="group-failed-members"' in page.text and dead in page.text
