"""A queue's contents, paged on the server: the JSON API and the queue's page list the
jobs waiting in one queue, the next to run first or the newest first, and a page of a
queue of 100,000 jobs reads that page's records and nothing more."""

from __future__ import annotations

import math
import re
from typing import Any

import httpx
import redis

from rota import Client
from tests.conftest import SHARDS
from tests.web.conftest import BASE

FORM = {"origin": BASE, "sec-fetch-site": "same-origin", "accept": "text/html"}

# Writes ``n`` queued jobs of ``name`` in the server, as an enqueue leaves them (the
# newest at the head of the list), each with a short args.
_FILL = """
for i = 1, tonumber(ARGV[2]) do
    local id = 'j' .. i
    redis.call('HSET', KEYS[1] .. id, 'name', ARGV[1], 'args', '[' .. i .. ']',
        'enqueued_at', tostring(1700000000000 + i))
    redis.call('LPUSH', KEYS[2], id)
end
redis.call('SADD', KEYS[3], ARGV[1])
"""


async def _enqueued(client: Client, name: str, n: int) -> list[str]:
    """The ids of ``n`` jobs of ``name`` enqueued one after another, their enqueue times
    then set 1 ms apart: over several shards the queue's order merges the shards' lists
    by enqueue time, equal times by shard (docs/web.md), and a quick producer sends
    several jobs in one ms."""
    ids = [(await client.enqueue(name, i)).id for i in range(n)]
    first = await client.job(ids[0])
    assert first is not None and first.enqueued_at is not None
    for i, job_id in enumerate(ids):
        shard = await client.admin.shard_holding(job_id)
        at = round(first.enqueued_at * 1000) + i
        await shard.redis.hset(shard.keys.job(job_id), "enqueued_at", at)
    return ids


def _calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def test_a_queue_lists_its_jobs_the_next_to_run_first(
    http: httpx.AsyncClient, client: Client
) -> None:
    ids = await _enqueued(client, "mail", 30)
    data = (await http.get("/api/queues/mail/jobs")).json()
    assert (data["name"], data["total"], data["offset"], data["limit"]) == ("mail", 30, 0, 25)
    assert (data["order"], data["paused"], data["served"]) == ("oldest", False, False)
    assert [j["id"] for j in data["jobs"]] == ids[:25]
    first = data["jobs"][0]
    assert (first["name"], first["state"], first["args"], first["args_bytes"]) == (
        "mail",
        "queued",
        "[0]",
        3,
    )
    record = await client.job(ids[0])
    assert record is not None and record.enqueued_at is not None
    assert first["enqueued_at"] == round(record.enqueued_at * 1000)
    rest = (await http.get("/api/queues/mail/jobs", params={"offset": 25})).json()
    assert [j["id"] for j in rest["jobs"]] == ids[25:]
    newest = await http.get("/api/queues/mail/jobs", params={"order": "newest", "limit": 3})
    assert [j["id"] for j in newest.json()["jobs"]] == ids[:-4:-1]
    # a job fetched from the queue is no longer listed
    oldest = await client.admin.shard_holding(ids[0])
    await oldest.redis.rpop(oldest.keys.queue("mail"))
    data = (await http.get("/api/queues/mail/jobs", params={"limit": 2})).json()
    assert data["total"] == 29 and [j["id"] for j in data["jobs"]] == ids[1:3]


async def test_args_are_shown_cut_and_big_args_are_not_read(
    http: httpx.AsyncClient, client: Client
) -> None:
    long = await client.enqueue("mail", "x" * 1000)
    big = await client.enqueue("mail", "y" * 100_000)
    data = (await http.get("/api/queues/mail/jobs")).json()
    shown = {j["id"]: j for j in data["jobs"]}
    assert shown[long.id]["args"] == ('["' + "x" * 1000)[:200]
    assert shown[long.id]["args_bytes"] == 1004
    assert shown[big.id]["args"] is None and shown[big.id]["args_bytes"] == 100_004
    page = await http.get("/queues/mail", headers=FORM)
    assert page.status_code == 200 and len(page.content) < 30_000
    assert f'href="/api/jobs/{big.id}/args"' in page.text and "100\u202f004 bytes" in page.text


async def test_unknown_queues_and_bad_parameters_are_refused(
    http: httpx.AsyncClient, client: Client
) -> None:
    await client.enqueue("mail", 1)
    assert (await http.get("/api/queues/nope/jobs")).status_code == 404
    assert (await http.get("/queues/nope", headers=FORM)).status_code == 404
    for params in ({"order": "sideways"}, {"limit": 0}, {"offset": -1}, {"limit": 501}):
        assert (await http.get("/api/queues/mail/jobs", params=params)).status_code == 400


async def test_a_page_deep_in_a_queue_of_100_000_reads_only_that_page(
    http: httpx.AsyncClient, client: Client, redis_sync: redis.Redis
) -> None:
    keys = client.admin.shards[0].keys
    n = 100_000
    await client.admin.shards[0].redis.eval(
        _FILL, 3, keys.job(""), keys.queue("big"), keys.names, "big", n
    )
    before = _calls(redis_sync)
    deep = await http.get("/api/queues/big/jobs", params={"offset": 99_990, "limit": 25})
    after = _calls(redis_sync)
    data = deep.json()
    assert data["total"] == n
    assert [j["id"] for j in data["jobs"]] == [f"j{i}" for i in range(99_991, n + 1)]
    assert [j["args"] for j in data["jobs"][:2]] == ["[99991]", "[99992]"]
    assert data["jobs"][0]["enqueued_at"] == 1700000000000 + 99_991

    def spent(command: str) -> int:
        return after.get(command, 0) - before.get(command, 0)

    # one LRANGE of the page, and the page's 10 records (and the count of its keyed
    # jobs, one HGET a shard): never the whole queue
    assert (spent("lrange"), spent("hmget"), spent("hstrlen")) == (1, 10, 10)
    if SHARDS == 1:
        assert spent("hget") == 1 + 10
    else:  # and the merge's enqueue times: the page's and those of the binary search of
        # the list that places them, two paths of its depth at most (docs/web.md)
        assert spent("hget") <= SHARDS + 10 + 2 * math.ceil(math.log2(n))
    assert spent("hgetall") == 0
    middle = await http.get(
        "/api/queues/big/jobs", params={"offset": 50_000, "limit": 3, "order": "newest"}
    )
    assert [j["id"] for j in middle.json()["jobs"]] == ["j50000", "j49999", "j49998"]
    page = await http.get("/queues/big", params={"offset": 99_975}, headers=FORM)
    rows = re.findall(r'<a href="/jobs/(j\d+)">', page.text)
    assert rows == [f"j{i}" for i in range(99_976, n + 1)]
    assert "99\u202f976–100\u202f000" in page.text


async def test_the_queues_page_links_each_queue_to_its_jobs(
    http: httpx.AsyncClient, client: Client
) -> None:
    ids = await _enqueued(client, "mail", 3)
    await client.admin.pause("mail")
    listing = await http.get("/queues", headers=FORM)
    assert '<a href="/queues/mail">mail</a>' in listing.text
    page = await http.get("/queues/mail", headers=FORM)
    assert page.status_code == 200
    assert re.findall(r'<a href="/jobs/([^"]+)">', page.text) == ids
    assert 'class="badge warn no-pool"' in page.text and "paused" in page.text
    newest = await http.get("/queues/mail", params={"order": "newest"}, headers=FORM)
    assert re.findall(r'<a href="/jobs/([^"]+)">', newest.text) == ids[::-1]
    done = await http.post("/queues/mail/resume", data={"next": "/queues/mail"}, headers=FORM)
    assert done.headers["location"] == "/queues/mail?done=resumed"
