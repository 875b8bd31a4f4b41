"""A job that waits for a parent whose job name no live pool serves says so, on its page
and its flow's, as the queues page does for the name: ``unserved`` in the API."""

from __future__ import annotations

import httpx

from rota import Client, JobContext, WorkerPool
from tests.helpers import pool_settings
from tests.web.conftest import BASE

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}
BADGE = 'class="badge warn no-pool"'


def _pool(redis_url: str, namespace: str) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def served(ctx: JobContext, n: int) -> None:
        pass

    @pool.job
    async def child(ctx: JobContext, n: int) -> None:
        pass

    return pool


async def test_a_parent_no_pool_serves_is_flagged(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    await client.admin.pause("served")  # its job stays queued while its pool runs
    orphan = await client.enqueue("orphan", 1)
    served = await client.enqueue("served", 1)
    done = await client.enqueue("finished", 1)
    await client.admin.shards[0].redis.hset(
        client.admin.shards[0].keys.job(done.id), "state", "complete"
    )
    await client.admin.shards[0].redis.lrem(
        client.admin.shards[0].keys.queue("finished"), 0, done.id
    )
    kid = await client.enqueue("child", 1, after=[orphan.id, served.id, done.id])
    async with _pool(redis_url, namespace).running(client=client):
        job = (await http.get(f"/api/jobs/{kid.id}")).json()
        flow = (await http.get(f"/api/flows/{kid.id}")).json()
        page = await http.get(f"/jobs/{kid.id}", headers=FORM)
        flow_page = await http.get(f"/flows/{kid.id}", headers=FORM)
        parent = (await http.get(f"/api/jobs/{orphan.id}")).json()
    assert job["state"] == "waiting" and job["unserved"] == ["orphan"]
    assert flow["unserved"] == ["orphan"]  # "finished" has no pool either, and is done
    assert parent["unserved"] == []  # it waits for no one: its own queue is on /queues
    assert 'id="job-no-pool"' in page.text and "No live pool serves orphan" in page.text
    parents = page.text.split('id="job-parents">')[1].split("</ul>")[0].split("<li>")[1:]
    assert [BADGE in li for li in parents] == [True, False, False]
    assert 'id="flow-no-pool"' in flow_page.text and "No live pool serves orphan" in flow_page.text


async def test_parents_that_pools_serve_are_not_flagged(
    http: httpx.AsyncClient, client: Client, redis_url: str, namespace: str
) -> None:
    await client.admin.pause("served")
    served = await client.enqueue("served", 1)
    kid = await client.enqueue("child", 1, after=[served.id])
    async with _pool(redis_url, namespace).running(client=client):
        job = (await http.get(f"/api/jobs/{kid.id}")).json()
        flow = (await http.get(f"/api/flows/{kid.id}")).json()
        page = await http.get(f"/jobs/{kid.id}", headers=FORM)
    assert (job["unserved"], flow["unserved"]) == ([], [])
    assert BADGE not in page.text
    # with no pool at all, the parent's name and the child's own are named
    flow = (await http.get(f"/api/flows/{kid.id}")).json()
    assert flow["unserved"] == ["child", "served"]
    assert (await http.get(f"/api/jobs/{kid.id}")).json()["unserved"] == ["served"]
