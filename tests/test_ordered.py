"""Ordered names over several shards on one real Redis: the jobs of a name declared
ordered share the shard its name names, so they start in enqueue order as on one server
(see rota.protocol.shards, rule 5); other names still spread."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import redis

from rota import Client, ConfigError, JobContext, JobSpec, WorkerPool
from rota.client.options import Options
from rota.client.resize import resize
from rota.config import Settings
from rota.protocol.keys import Keys
from rota.protocol.shards import shard_of, shard_tags
from rota.web import create_app
from tests.cli_helpers import rota_env, run_rota
from tests.helpers import pool_settings, wait_until
from tests.unit.test_shard_tags import K


@pytest.fixture
async def producers(redis_url: str, namespace: str) -> AsyncIterator[tuple[Client, Client]]:
    """Two producers of one namespace over K shards, both declaring ``invoice`` ordered."""
    a = Client.from_url(redis_url, namespace, shards=K, ordered=frozenset({"invoice"}))
    b = Client.from_url(redis_url, namespace, shards=K, ordered="invoice")
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def queued(redis_sync: redis.Redis, namespace: str, name: str) -> list[int]:
    """How many jobs of ``name`` each shard's queue holds."""
    return [redis_sync.llen(Keys(namespace, i, K).queue(name)) for i in range(K)]


async def test_an_ordered_name_starts_in_enqueue_order_from_two_producers(
    producers: tuple[Client, Client], redis_url: str, namespace: str
) -> None:
    """200 jobs enqueued by two producers in turn start in that order, one at a time:
    without the declaration they spread over the K shards, whose turns interleave."""
    for seq in range(200):
        await producers[seq % 2].enqueue("invoice", seq=seq)
    started: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=K, concurrency=1))

    @pool.job(name="invoice")
    async def invoice(ctx: JobContext, seq: int) -> None:
        started.append(seq)

    async with pool.running():
        await wait_until(lambda: len(started) == 200, within=60)
    assert started == list(range(200))


async def test_enqueue_many_mixes_ordered_and_spread_jobs(
    producers: tuple[Client, Client], redis_sync: redis.Redis, namespace: str
) -> None:
    """One call: the client's ordered name, a job ordered on its own (``ordered=True``),
    and a name neither declares; each job is found by its id."""
    specs = [JobSpec(name="invoice", kwargs={"i": i}) for i in range(100)]
    specs += [JobSpec(name="mail", kwargs={"i": i}, ordered=True) for i in range(100)]
    specs += [JobSpec(name="other", kwargs={"i": i}) for i in range(400)]
    jobs = await producers[0].enqueue_many(specs)
    for name in ("invoice", "mail"):
        expected = [0] * K
        expected[shard_of(name, K)] = 100
        assert queued(redis_sync, namespace, name) == expected
    spread = queued(redis_sync, namespace, "other")
    assert sum(spread) == 400 and min(spread) > 50  # 100 each on average
    for job in jobs[95:105]:  # ordered ids name the shard they are in
        assert shard_of(job.id, K) == shard_of(job.name, K)
        record = await producers[1].job(job.id)
        assert record is not None and record.state == "queued"


async def test_a_job_with_its_own_key_goes_by_that_key(
    producers: tuple[Client, Client], redis_sync: redis.Redis, namespace: str
) -> None:
    """A fair key outranks the name: such a job is outside the name's order."""
    key = next(f"t{i}" for i in range(100) if shard_of(f"t{i}", K) != shard_of("invoice", K))
    await producers[0].enqueue("invoice", fair_key=key)
    assert redis_sync.exists(Keys(namespace, shard_of(key, K), K).fair_queue("invoice", key))


def test_the_setting_names_the_ordered_names_of_the_pools_own_client() -> None:
    settings = Settings(ordered="invoice, mail  charge")
    assert Options.of(settings).ordered == {"invoice", "mail", "charge"}
    with pytest.raises(ConfigError, match="ordered: invalid job name 'a/b'"):
        Settings(ordered="invoice a/b")


async def test_the_cli_and_the_http_api_route_an_ordered_job_by_its_name(
    producers: tuple[Client, Client], redis_url: str, redis_sync: redis.Redis, namespace: str
) -> None:
    """``rota enqueue --ordered``, the setting ``ordered`` (``ROTA_ORDERED``) and the
    API's ``"ordered": true`` all route by the name."""
    redis_sync.set(Keys(namespace, 0, K).shards, K)  # as a pool records it: the CLI follows
    where = ("--redis-url", redis_url, "--namespace", namespace)
    for _ in range(5):
        assert run_rota("enqueue", "invoice", "--ordered", *where).returncode == 0
        by_env = run_rota("enqueue", "mail", *where, env=rota_env(ROTA_ORDERED="mail"))
        assert by_env.returncode == 0, by_env.stderr
    app = create_app(pool_settings(redis_url, namespace, shards=K), client=producers[1])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:5040"
    ) as http:
        for _ in range(5):
            sent = await http.post("/api/jobs", json={"name": "charge", "ordered": True})
            assert sent.status_code == 201, sent.text
    for name in ("invoice", "mail", "charge"):
        expected = [0] * K
        expected[shard_of(name, K)] = 5
        assert queued(redis_sync, namespace, name) == expected


async def test_an_ordered_name_stays_in_its_old_home_while_jobs_queue_there(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """2 -> 4 shards: jobs of an ordered name sent during the change join those queued
    in its old home, so all start in enqueue order; once that queue is empty the name
    moves to its new home."""
    name = next(f"inv{i}" for i in range(100) if shard_of(f"inv{i}", 2) == 1)
    while shard_tags(namespace, 2)[1] in shard_tags(namespace, 4):  # one tag in both
        namespace += "x"
    ordered = frozenset({name})
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 2)
    old = Keys.of_tag(namespace, shard_tags(namespace, 2)[1], 1)
    async with Client.from_url(redis_url, namespace, shards=2, ordered=ordered) as before:
        for seq in range(10):
            await before.enqueue(name, seq=seq)
    async with Client.from_url(redis_url, namespace, ordered=ordered) as during:
        assert not (await resize(during, 4, wait=False)).done
        await during.admin.follower.reread()
        for seq in range(10, 20):
            await during.enqueue(name, seq=seq)
        assert redis_sync.llen(old.queue(name)) == 20
        started: list[int] = []
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=4, concurrency=1))

        @pool.job(name=name)
        async def invoice(ctx: JobContext, seq: int) -> None:
            started.append(seq)

        async with pool.running():
            await wait_until(lambda: len(started) == 20, within=60)
            assert started == list(range(20))
            await during.enqueue(name, seq=20)  # its old queue is empty: the new home
            await wait_until(lambda: len(started) == 21, within=60)
        assert (await resize(during, 4)).done
        await during.enqueue(name, seq=21)
    new = Keys.of_tag(namespace, shard_tags(namespace, 4)[shard_of(name, 4)], 1)
    assert redis_sync.llen(new.queue(name)) == 1


async def test_a_chain_of_an_ordered_name_starts_in_its_names_shard(
    producers: tuple[Client, Client], redis_sync: redis.Redis, namespace: str
) -> None:
    """The first step of a chain has no parent: an ordered name routes it, and the steps
    after it follow it there."""
    steps = await producers[0].chain([JobSpec(name="invoice"), JobSpec(name="mail")])
    home = shard_of("invoice", K)
    assert redis_sync.llen(Keys(namespace, home, K).queue("invoice")) == 1
    assert all(shard_of(s.id, K) == home for s in steps)
    assert redis_sync.exists(Keys(namespace, home, K).job(steps[1].id))
