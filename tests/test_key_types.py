"""A key of rota's own namespace written by hand with another type stops nothing.

Every command of a script on such a key answers ``WRONGTYPE``: a string where the ready
set belongs failed every fetch, so no pool of the namespace ran anything again. A pool
moves such a key to its quarantine key (``{ns}:quarantine:<key>``), its data kept, says
so in one warning line, and carries on: at its start, and when one of its scripts
answers ``WRONGTYPE`` while it runs. Each test spoils one key of a real Redis, runs a
pool and a good job, and reads the quarantine key.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
import pytest
import redis
import redis.exceptions
from structlog.testing import capture_logs

from rota import Client, JobContext, RedisRefused, WorkerPool
from rota.cli import main
from rota.protocol import calls
from rota.protocol.keys import Keys
from rota.protocol.repair import repair
from rota.worker.rounds import BEAT, FETCH, REAP, TICK
from tests.helpers import pool_settings, rounds, wait_until

MOVED = "key of another type moved to its quarantine key"

#: The keys the scripts read and write, by what follows the prefix -> how to spell it.
KEYS: dict[str, Callable[[Keys], str]] = {
    "running:work": lambda k: k.running("work"),
    "queue:work": lambda k: k.queue("work"),
    "wake:work": lambda k: k.wake("work"),
    "leased": lambda k: k.leased,
    "ready": lambda k: k.ready,
    "scheduled": lambda k: k.scheduled,
    "retry": lambda k: k.retry,
    "dead": lambda k: k.dead,
    "complete": lambda k: k.complete,
    "waiting": lambda k: k.waiting,
    "pools": lambda k: k.pools,
    "names": lambda k: k.names,
    "paused": lambda k: k.paused,
    "limits": lambda k: k.limits,
    "rates": lambda k: k.rates,
    "ratetat": lambda k: k.rate_tat,
    "priorities": lambda k: k.priorities,
    "beats": lambda k: k.beats,
    "idle": lambda k: k.idle,
    "schedwake": lambda k: k.sched_wake,
    "stats": lambda k: k.stats,
}


#: What :func:`spoil` writes, as its type's read returns it.
WRITTEN: dict[str, Any] = {"string": b"written by hand", "hash": {b"written": b"by hand"}}


def spoil(r: redis.Redis, key: str, kind: str) -> None:
    """Write ``key`` by hand as a ``kind`` (string or hash)."""
    r.delete(key)
    if kind == "string":
        r.set(key, "written by hand")
    else:
        r.hset(key, "written", "by hand")


def content(r: redis.Redis, key: str, kind: str) -> Any:
    return r.get(key) if kind == "string" else r.hgetall(key)


def moved_lines(logs: list[MutableMapping[str, Any]], key: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if str(e["event"]).startswith(MOVED) and e.get("key") == key]


def work_pool(redis_url: str, namespace: str, ran: list[str]) -> WorkerPool:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, heartbeat_interval=0.2))

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.append(ctx.id)

    return pool


async def enqueue_work(client: Client) -> str:
    """Enqueue a good job: refused while the key an enqueue writes holds another type,
    taken once the pool moved it away."""
    taken: list[str] = []

    async def once() -> bool:
        try:
            taken.append((await client.enqueue("work")).id)
        except RedisRefused:
            return False
        return True

    await wait_until(once)
    return taken[0]


def check_moved(
    r: redis.Redis, logs: list[MutableMapping[str, Any]], key: str, quarantine: str, kind: str
) -> None:
    assert content(r, quarantine, kind) == WRITTEN[kind]
    assert r.type(key) != (b"string" if kind == "string" else b"hash")
    lines = moved_lines(logs, key)
    assert len(lines) == 1, lines
    assert lines[0]["moved_to"] == quarantine
    assert lines[0]["type"] == kind


@pytest.mark.one_shard("writes one shard's keys")
@pytest.mark.parametrize(
    ("suffix", "kind"),
    [*((suffix, "string") for suffix in KEYS), ("ready", "hash"), ("queue:work", "hash")],
)
async def test_a_key_of_another_type_at_the_start_is_moved_and_the_pool_serves(
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    suffix: str,
    kind: str,
) -> None:
    keys = Keys(namespace)
    key = KEYS[suffix](keys)
    spoil(redis_sync, key, kind)
    ran: list[str] = []
    with capture_logs() as logs:
        async with work_pool(redis_url, namespace, ran).running():
            job = await enqueue_work(client)
            await wait_until(lambda: job in ran)
    check_moved(redis_sync, logs, key, keys.quarantine(suffix), kind)


@pytest.mark.one_shard("writes one shard's keys")
@pytest.mark.parametrize(
    "suffix", ["running:work", "ready", "leased", "pools", "scheduled", "retry", "beats"]
)
async def test_a_key_spoiled_while_the_pool_runs_is_moved_at_the_first_wrongtype(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis, suffix: str
) -> None:
    """The script that meets the key (a fetch, the reaper, the heartbeat, the scheduler)
    answers WRONGTYPE; the pool moves the key and carries on, instead of trying again
    for ever."""
    keys = Keys(namespace)
    key = KEYS[suffix](keys)
    ran: list[str] = []
    pool = work_pool(redis_url, namespace, ran)
    with capture_logs() as logs:
        async with pool.running():
            first = await enqueue_work(client)
            await wait_until(lambda: first in ran)
            spoil(redis_sync, key, "string")
            job = await enqueue_work(client)
            await wait_until(lambda: job in ran)
            # Every loop that may meet the key (the scheduler's next tick comes only at
            # its interval, 10 s, unless nudged) ends a round begun after the spoiling.
            for kind in (FETCH, BEAT, REAP, TICK):
                await rounds(pool, kind)
    check_moved(redis_sync, logs, key, keys.quarantine(suffix), "string")


@pytest.mark.one_shard("writes one shard's keys")
async def test_a_quarantine_key_taken_already_keeps_both(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A key spoiled twice: the second goes to a quarantine key of its own, the first
    stays as it was (nothing is ever deleted)."""
    keys = Keys(namespace)
    redis_sync.set(keys.quarantine("ready"), "the first")
    spoil(redis_sync, keys.ready, "string")
    ran: list[str] = []
    with capture_logs() as logs:
        async with work_pool(redis_url, namespace, ran).running():
            job = await enqueue_work(client)
            await wait_until(lambda: job in ran)
    assert redis_sync.get(keys.quarantine("ready")) == b"the first"
    lines = moved_lines(logs, keys.ready)
    assert len(lines) == 1, lines
    second = lines[0]["moved_to"]
    assert second.startswith(keys.quarantine("ready") + ":")
    assert redis_sync.get(second) == b"written by hand"


@pytest.mark.one_shard("calls one shard's scripts")
@pytest.mark.parametrize("suffix", ["running:other", "ratetat"])
async def test_a_fetch_that_meets_the_key_after_leasing_strands_no_job(
    client: Client, namespace: str, redis_sync: redis.Redis, suffix: str
) -> None:
    """A fetch reads the running set of a name with a concurrency limit, and the next
    start of a rate-limited one, when it visits that name: after it leased the jobs of
    the names before. Its WRONGTYPE must not strand those (their records running, with
    no lease, in no queue): the call's jobs go back to their queues, as they were."""
    keys = Keys(namespace)
    await calls.register(
        client.admin.shards[0].scope, [("work", 1, "", ""), ("other", 1, 5, "1000/1000")]
    )
    work = await client.enqueue("work")
    await client.enqueue("other")
    key = keys.running("other") if suffix == "running:other" else keys.rate_tat
    spoil(redis_sync, key, "string")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await calls.fetch(
            client.admin.shards[0].scope, calls.Lessee(30_000, "p", 1 << 20), ["work", "other"], []
        )
    assert redis_sync.hget(keys.job(work.id), "state") == b"queued"
    assert redis_sync.lrange(keys.queue("work"), 0, -1) == [work.id.encode()]
    assert redis_sync.zcard(keys.running("work")) == 0
    assert await repair(client.admin.shards[0].scope, ["work", "other"])
    reply = await calls.fetch(
        client.admin.shards[0].scope, calls.Lessee(30_000, "p", 1 << 20), ["work"], []
    )
    assert [job.id for job in reply.jobs] == [work.id]


@pytest.mark.one_shard("writes one shard's keys")
async def test_a_queue_spoiled_while_the_pool_runs_is_moved_at_the_next_fetch(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """The plain-command enqueue (docs/protocol.md) onto a queue of another type fails
    its LPUSH only: the name is ready and a wake token waits. The fetch it wakes meets
    the queue and answers WRONGTYPE, the pool moves the queue away, and the producers'
    enqueues are taken again (they were refused until then), instead of the name
    leaving the ready set with no pool ever serving it again."""
    keys = Keys(namespace)
    ran: list[str] = []
    with capture_logs() as logs:
        async with work_pool(redis_url, namespace, ran).running():
            first = await enqueue_work(client)
            await wait_until(lambda: first in ran)
            spoil(redis_sync, keys.queue("work"), "string")
            redis_sync.sadd(keys.ready, "work")
            redis_sync.lpush(keys.wake("work"), "1")
            job = await enqueue_work(client)
            await wait_until(lambda: job in ran)
    check_moved(redis_sync, logs, keys.queue("work"), keys.quarantine("queue:work"), "string")


SHARDS_MOVED = "shard count record names no count: moved to its quarantine key"


@pytest.mark.one_shard("writes shard 0's record and runs a pool of one shard")
@pytest.mark.parametrize("held", ["written by hand", "0", "257", "1.0", "<hash>"])
async def test_a_shard_count_record_that_names_no_count_stops_no_pool_nor_the_cli(
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    client: Client,
    capsys: pytest.CaptureFixture[str],
    held: str,
) -> None:
    """``{ns}:shards`` written by hand: a pool's start read it with ``int()`` (a
    traceback at every start: no pool could serve the namespace), and the CLI too."""
    keys = Keys(namespace)
    if held == "<hash>":
        redis_sync.hset(keys.shards, "written", "by hand")
    else:
        redis_sync.set(keys.shards, held)
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    assert await anyio.to_thread.run_sync(main, ["status", *conn]) == 0
    capsys.readouterr()
    ran: list[str] = []
    with capture_logs() as logs:
        async with work_pool(redis_url, namespace, ran).running():
            job = await enqueue_work(client)
            await wait_until(lambda: job in ran)
    lines = [e for e in logs if e["event"] == SHARDS_MOVED]
    assert len(lines) == 1, lines
    assert (lines[0]["key"], lines[0]["held"]) == (keys.shards, held)
    moved = keys.quarantine("shards")
    assert lines[0]["moved_to"] == moved
    if held == "<hash>":
        assert redis_sync.hgetall(moved) == {b"written": b"by hand"}
    else:
        assert redis_sync.get(moved) == held.encode()
    assert not redis_sync.exists(keys.shards)  # one shard: nothing to record
