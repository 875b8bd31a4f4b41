"""The ready set: a fetch visits only the queues that may hold runnable jobs.

Every script that fills a queue names it there; a fetch takes out the names it finds
empty, paused or at their limit; resume and a freed slot put them back.
"""

from __future__ import annotations

import time
from typing import Any, cast

import redis

from rota import Client, JobSpec
from rota.protocol.rows import Fetched
from rota.protocol.scripts import script


def _now() -> int:
    return int(time.time() * 1000)


def _ready(redis_sync: redis.Redis, client: Client) -> set[str]:
    return {
        m.decode() for m in cast(set[bytes], redis_sync.smembers(client.admin.shards[0].keys.ready))
    }


async def _fetch(client: Client, robin: list[str], fill: list[str]) -> list[Any]:
    args: list[str | int] = [_now(), 30000, "pool-1", 1 << 20, len(robin), *robin, len(fill), *fill]
    flat, *_ = await script("fetch")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        args,
        client.admin.shards[0].script_mode,
    )
    return list(flat)


def _calls(redis_sync: redis.Redis, command: str) -> int:
    row = redis_sync.info("commandstats").get(f"cmdstat_{command}")
    return int(row["calls"]) if row else 0


async def test_scripts_keep_the_ready_set(client: Client, redis_sync: redis.Redis) -> None:
    await client.enqueue("a")
    await client.enqueue_many([JobSpec(name="b"), JobSpec(name="b")])
    await client.enqueue_in(60, "c")  # scheduled: its queue is empty
    assert _ready(redis_sync, client) == {"a", "b"}

    await client.admin.pause("b")
    assert _ready(redis_sync, client) == {"a"}
    assert len(Fetched.parse(await _fetch(client, ["b"], ["a"]))) == 1  # b is paused: a fills
    assert _ready(redis_sync, client) == set()  # a is empty now
    await client.admin.resume("b")
    assert _ready(redis_sync, client) == {"b"}

    await client.admin.set_limit("b", 1)
    assert len(Fetched.parse(await _fetch(client, ["b", "b"], []))) == 1  # one under the limit
    assert _ready(redis_sync, client) == set()  # at its limit, one job still queued
    await client.admin.set_limit("b", None)
    assert _ready(redis_sync, client) == {"b"}


async def test_a_fetch_costs_the_same_whatever_the_number_of_idle_names(
    client: Client, redis_sync: redis.Redis
) -> None:
    names = [f"n{i}" for i in range(500)]
    await client.enqueue_many([JobSpec(name="n250") for _ in range(30)])
    rpop, sismember = _calls(redis_sync, "rpop"), _calls(redis_sync, "sismember")
    jobs = Fetched.parse(await _fetch(client, names[:20], names[20:]))
    assert len(jobs) == 20  # the batch is filled from the one busy name
    assert {job.name for job in jobs} == {"n250"}
    # One RPOP of 20 entries for the busy name (the fill wants what is missing), none per
    # idle name; the 10 entries left stay queued.
    assert _calls(redis_sync, "rpop") - rpop == 1
    assert redis_sync.llen(client.admin.shards[0].keys.queue("n250")) == 10
    assert _calls(redis_sync, "sismember") - sismember == 1  # the paused check of n250


async def test_entries_popped_and_not_leased_go_back_in_their_order(
    client: Client, redis_sync: redis.Redis
) -> None:
    # The fill pops what is missing from each name it visits (4 from a, then 3 from b)
    # and leases one of each per round: what it did not lease goes back to the tail.
    ids = {}
    for name in ("a", "b"):
        jobs = await client.enqueue_many([JobSpec(name=name) for _ in range(6)])
        ids[name] = [job.id for job in jobs]
    leased = [job.id for job in Fetched.parse(await _fetch(client, ["x"] * 4, ["a", "b"]))]
    assert leased == [ids["a"][0], ids["b"][0], ids["a"][1], ids["b"][1]]  # oldest first
    for name in ("a", "b"):
        queue = cast(list[bytes], redis_sync.lrange(client.admin.shards[0].keys.queue(name), 0, -1))
        assert [e.decode() for e in reversed(queue)] == ids[name][2:]  # the tail is next
    assert _ready(redis_sync, client) == {"a", "b"}


async def test_a_usual_reaper_pass_visits_only_names_with_leases(
    client: Client, redis_sync: redis.Redis
) -> None:
    for i in range(200):
        await client.enqueue(f"n{i}")
    await _fetch(client, ["n7"], [])  # one lease: n7 joins the leased set
    assert {
        m.decode()
        for m in cast(set[bytes], redis_sync.smembers(client.admin.shards[0].keys.leased))
    } == {"n7"}
    before = _calls(redis_sync, "zrangebyscore")
    now = _now()
    await script("reap")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        [now, 3, 15000, 100, "leased"],
        client.admin.shards[0].script_mode,
    )
    # n7's leases and the pools, each read up to now and past the year 9999 (a deadline
    # no time names: reclaimed too)
    assert _calls(redis_sync, "zrangebyscore") - before == 4
