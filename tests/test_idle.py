"""An idle pool costs Redis a few commands a second, whatever its concurrency."""

from __future__ import annotations

import threading
from collections import Counter

import anyio
import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.keys import Keys
from rota.protocol.shards import new_id_in
from rota.worker.rounds import BEAT, rounds_of
from tests.helpers import pool_settings, rounds, wait_until
from tests.redis_server import RedisServer


def _monitor(server: RedisServer, seconds: float, sent: Counter[str]) -> None:
    """Count the commands clients send (MONITOR), leaving out those scripts run inside."""
    r = server.client()
    with r.monitor() as m:  # type: ignore[no-untyped-call]
        import time

        end = time.monotonic() + seconds
        for event in m.listen():
            if event["client_type"] != "lua" and event["command"] != "PING":
                sent[event["command"].split()[0].upper()] += 1
            if time.monotonic() > end:
                break
    r.close()


@pytest.mark.one_shard("an idle pool waits on every shard")
async def test_idle_pool_sends_at_most_three_commands_a_second(
    fresh_redis_server: RedisServer,
) -> None:
    pool = WorkerPool(settings=pool_settings(fresh_redis_server.url, "idle", concurrency=100))
    for i in range(10):

        async def handler(ctx: JobContext) -> None: ...

        pool.job(name=f"name{i}")(handler)

    sent: Counter[str] = Counter()
    async with pool.running():
        await anyio.sleep(1.0)  # let start-up settle
        watcher = threading.Thread(target=_monitor, args=(fresh_redis_server, 10.0, sent))
        watcher.start()
        await anyio.to_thread.run_sync(watcher.join)
    total = sum(sent.values())
    assert sent["BLPOP"] >= 2, f"the pool was not waiting on wake lists: {sent}"
    assert total <= 30, sent  # the bound of the issue; about 10 are expected


@pytest.mark.parametrize("shards", [1, 4])
async def test_an_idle_pool_waits_on_one_connection_whatever_its_shards_on_one_server(
    fresh_redis_server: RedisServer, shards: int
) -> None:
    """The shards of a pool on one server wait on their wake lists together: one BLPOP
    for the fetchers, one for the schedulers and one subscription for aborts, as with a
    single shard (a BLPOP per shard held four times as many; see rota.worker.waits)."""
    pool = WorkerPool(
        settings=pool_settings(fresh_redis_server.url, "idle", concurrency=20, shards=shards)
    )
    for i in range(5):

        async def handler(ctx: JobContext) -> None: ...

        pool.job(name=f"name{i}")(handler)

    async with pool.running():
        await anyio.sleep(0.5)  # every shard started and waiting
        with fresh_redis_server.client() as r:
            waiting = Counter(c["cmd"] for c in r.client_list())
    assert (waiting["blpop"], waiting["subscribe"]) == (2, 1), waiting


def _calls(server: RedisServer) -> int:
    """Commands the server has run, those inside scripts included, but INFO (this
    test's own reads, and the pools' memory checks)."""
    with server.client() as r:
        stats = r.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def _idle_commands(server: RedisServer, shards: int, window: float) -> float:
    """What one idle pool over ``shards`` shards (one name with a limit, so that the
    limits' rebalancer runs) costs the server over ``window`` seconds, per beat of its
    first shard's heartbeat: every loop runs on a timer of about that interval, so a
    host too busy to keep the pool's timers lowers both figures alike."""
    settings = pool_settings(
        server.url,
        f"idle{shards}",
        shards=shards,
        heartbeat_interval=0.5,
        wake_timeout=0.5,
        scheduler_interval=1.0,
    )
    pool = WorkerPool(settings=settings)

    async def handler(ctx: JobContext) -> None: ...

    pool.job(name="limited", max_concurrency=24)(handler)
    async with pool.running() as rt:
        beats = rounds_of(rt.pool_id)
        await anyio.sleep(1.0)  # past the start (registration, first beats and passes)
        before, beat = _calls(server), beats.ended[BEAT, 0]
        await anyio.sleep(window)
        spent, beaten = _calls(server) - before, beats.ended[BEAT, 0] - beat
    assert beaten > 0, "the pool did not beat in the window"
    return spent / beaten


async def test_an_idle_pools_commands_grow_little_with_its_shards_on_one_server(
    fresh_redis_server: RedisServer,
) -> None:
    """Eight shards on one server cost an idle pool at most twice what one does: the
    loops of the shards but 0 follow one look a beat from shard 0 (rota.worker.idle) and
    send nothing of their own while it finds nothing; what eight shards add is the
    limits' rebalancer (a single shard has none to move) and the looks, a few commands
    an interval whatever the count (about 9.3 times before the per-shard checks, 4.7-5.0
    before the snapshot's move, 4.2-4.7 before the look, 1.3-1.4 with it)."""
    one = await _idle_commands(fresh_redis_server, 1, 6.0)
    eight = await _idle_commands(fresh_redis_server, 8, 6.0)
    assert one > 0
    assert eight <= 2 * one, (one, eight, eight / one)


async def test_a_ready_job_without_a_wake_token_starts_at_the_safety_net_over_shards(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """The shards of a pool on one server skip the fetch at their BLPOP's timeout while
    every ready set is empty (rota.worker.waits): a job made ready without a token (a
    producer that forgot to push one) is still fetched at the next timeout."""
    k, ran = 4, anyio.Event()
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, shards=k, wake_timeout=0.3))

    @pool.job
    async def tokenless(ctx: JobContext) -> None:
        ran.set()

    job_id = new_id_in(2, k)
    keys = Keys(namespace, 2, k)
    async with Client.from_url(redis_url, namespace, shards=k) as client, pool.running():
        await client.enqueue_many([JobSpec(name="tokenless", job_id=job_id, delay=3600)])
        await rounds(pool)
        wakes = pool.current_run.wakes if pool.current_run is not None else None
        assert wakes is not None  # the shards share a server: one wait for them all
        await wait_until(lambda: wakes.waiting == set(range(k)))  # none is fetching
        # What the scheduler would do at its due time, less the wake token.
        with redis_sync.pipeline(transaction=True) as pipe:
            pipe.zrem(keys.scheduled, job_id)
            pipe.hset(keys.job(job_id), "state", "queued")
            pipe.lpush(keys.queue("tokenless"), job_id)
            pipe.sadd(keys.ready, "tokenless")
            pipe.execute()
        await wait_until(ran.is_set, within=10)
