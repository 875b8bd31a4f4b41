"""Fair keys: within a job name, the jobs of different keys take turns (stride scheduling,
weights), FIFO within a key; jobs without a key keep the plain list, as one more
participant of weight 1. Orders are counted from ledgers, never from times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

import anyio
import pytest
import redis

from rota import Client, JobContext, JobSpec, Retry, WorkerPool
from rota.protocol import calls
from rota.protocol.shards import shard_of
from tests.helpers import lease_tokens, pool_settings, rounds, wait_until

Ledger = list[tuple[str, int]]


def ledger_pool(redis_url: str, namespace: str, ran: Ledger, **changes: object) -> WorkerPool:
    """A pool whose ``hook`` notes (key, seq) of each job it starts."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **changes))

    @pool.job
    async def hook(ctx: JobContext, key: str, seq: int) -> None:
        ran.append((key, seq))

    return pool


def keyed(key: str, n: int, start: int = 0) -> list[JobSpec]:
    return [
        JobSpec(name="hook", kwargs={"key": key, "seq": i}, fair_key=key)
        for i in range(start, start + n)
    ]


async def enqueue(client: Client, specs: list[JobSpec]) -> None:
    for i in range(0, len(specs), 1000):
        await client.enqueue_many(specs[i : i + 1000])


def deadline(r: redis.Redis, key: str) -> float:
    """The lease deadline of the one job of a key's running set."""
    rows = cast(list[tuple[bytes, float]], r.zrange(key, 0, -1, withscores=True))
    return float(rows[0][1])


def fair_keys_left(r: redis.Redis, namespace: str) -> list[bytes]:
    """The per-key state left in Redis (lists, running sets, key sets, backlog)."""
    found: list[bytes] = []
    for kind in ("fqueue", "frun", "fkeys", "frest", "fbacklog"):
        found += list(r.scan_iter(match="{" + namespace + "*}:" + kind + ":*"))  # every shard
    return found


async def test_a_flood_never_starves_small_keys_and_fifo_holds_within_a_key(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    await enqueue(client, keyed("flood", 2000))
    small = [f"small-{k}" for k in range(100)]
    await enqueue(client, [s for k in small for s in keyed(k, 3)])
    (q,) = await client.admin.queues(["hook"])
    assert q.size == 2300  # keyed jobs count as the name's queued jobs
    ran: Ledger = []
    async with ledger_pool(redis_url, namespace, ran, concurrency=20).running():
        await wait_until(lambda: len(ran) == 2300, within=60)
    flood_end = max(i for i, (key, _) in enumerate(ran) if key == "flood")
    firsts = {key: i for i, (key, _) in reversed(list(enumerate(ran)))}
    assert all(firsts[k] < flood_end for k in small)
    # every small key's jobs ran in the flood's first ~2 x 300 starts
    assert max(i for i, (key, _) in enumerate(ran) if key != "flood") < 700, ran[:50]
    for key in {k for k, _ in ran}:
        seqs = [s for k, s in ran if k == key]
        assert seqs == sorted(seqs), f"{key} ran out of order"
    (q,) = await client.admin.queues(["hook"])
    assert q.size == 0
    assert fair_keys_left(redis_sync, namespace) == []  # idle keys are forgotten


@pytest.mark.one_shard("turns are counted within a shard")
async def test_weights_share_the_turns_within_two_percent(
    client: Client, redis_url: str, namespace: str
) -> None:
    weights = {"w1": 1, "w2": 2, "w4": 4}
    for key, w in weights.items():
        await client.admin.fair.set_weight("hook", key, w)
        await enqueue(client, keyed(key, 2000))
    ran: Ledger = []
    pool = ledger_pool(redis_url, namespace, ran, concurrency=10)
    async with pool.running():
        await wait_until(lambda: len(ran) >= 2800, within=60)
        await client.admin.pause("hook")
    first = Counter(key for key, _ in ran[:2800])  # w4 has jobs left: all are busy
    for key, w in weights.items():
        expected = 2800 * w / 7
        assert abs(first[key] - expected) <= 0.02 * expected, first
    rows = {r.key: r for r in await client.admin.fair.of("hook")}
    assert {k: r.weight for k, r in rows.items()} == weights
    assert sum(r.queued for r in rows.values()) == 6000 - len(ran)


async def test_a_key_limit_holds_across_three_pools(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []

    def make_pool() -> WorkerPool:
        pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=8))

        @pool.job
        async def hook(ctx: JobContext, key: str, seq: int) -> None:
            running[key] += 1
            most[key] = max(most[key], running[key])
            await anyio.sleep(0.005)
            running[key] -= 1
            done.append(key)

        return pool

    await client.admin.fair.set_key_limit("hook", None, 3)  # every key's default
    await client.admin.fair.set_key_limit("hook", "two", 2)
    await enqueue(client, keyed("two", 60) + keyed("three", 60) + keyed("free", 1))
    rows = {r.key: r.limit for r in await client.admin.fair.of("hook")}
    assert rows == {"two": 2, "three": 3, "free": 3}
    shards = client.admin.shards  # a key lives in the shard it names: its limit is exact
    frun = shards[shard_of("two", len(shards))].keys.fair_running("hook", "two")
    samples: list[int] = []

    async def sample() -> None:
        while True:
            samples.append(int(redis_sync.zcard(frun)))
            await anyio.sleep(0.002)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        async with make_pool().running(), make_pool().running(), make_pool().running():
            await wait_until(lambda: len(done) == 121, within=60)
        tg.cancel_scope.cancel()
    assert most["two"] == 2 and most["three"] == 3  # reached, never passed
    assert max(samples) <= 2
    assert fair_keys_left(redis_sync, namespace) == []


async def test_pause_and_resume_one_key(client: Client, redis_url: str, namespace: str) -> None:
    await client.admin.fair.pause_key("hook", "quiet")
    await enqueue(client, keyed("quiet", 5) + keyed("loud", 5))
    ran: Ledger = []
    pool = ledger_pool(redis_url, namespace, ran, concurrency=2)
    async with pool.running():
        await wait_until(lambda: len(ran) == 5, within=20)
        await rounds(pool)
        assert {k for k, _ in ran} == {"loud"}
        (row,) = [r for r in await client.admin.fair.of("hook") if r.key == "quiet"]
        assert (row.queued, row.paused) == (5, True)
        await client.admin.fair.resume_key("hook", "quiet")
        await wait_until(lambda: len(ran) == 10, within=20)
    assert [s for k, s in ran if k == "quiet"] == list(range(5))


@pytest.mark.one_shard("one key's rate in one shard")
async def test_a_rate_per_key_rests_the_key_and_brings_it_back(
    client: Client, redis_url: str, namespace: str
) -> None:
    await client.admin.fair.set_key_rate("hook", "slow", "5/s")
    await enqueue(client, keyed("slow", 8) + keyed("fast", 60))
    ran: Ledger = []
    async with ledger_pool(redis_url, namespace, ran, concurrency=4).running():
        await wait_until(lambda: len(ran) == 68, within=30)
    # the fast key is not held back by the slow one: it was done long before
    fast_end = max(i for i, (k, _) in enumerate(ran) if k == "fast")
    assert sum(1 for k, _ in ran[: fast_end + 1] if k == "slow") < 8
    assert [s for k, s in ran if k == "slow"] == list(range(8))
    assert await client.admin.fair.of("hook") == []  # none queued: none listed


@pytest.mark.one_shard("the scripts are called on one shard")
async def test_a_lost_lease_returns_a_keyed_job_to_the_front_of_its_key(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    await client.admin.fair.set_key_limit("hook", "t1", 5)  # a limit keeps its running set
    await enqueue(client, keyed("t1", 3))
    tokens = await lease_tokens(client, "hook", 1)
    (job_id,) = tokens
    p = "{" + namespace + "}:"
    assert redis_sync.zcard(p + "frun:hook/t1") == 1
    redis_sync.zadd(p + "running:hook", {job_id: 1})  # its lease ran out long ago
    reply = await calls.reap(client.admin.shards[0].scope, 3, 60_000, 100)
    assert reply.reclaimed == [job_id]
    assert redis_sync.zcard(p + "frun:hook/t1") == 0
    assert redis_sync.lindex(p + "fqueue:hook/t1", -1) == job_id.encode()  # next to run
    assert redis_sync.llen(p + "queue:hook") == 0
    again = await lease_tokens(client, "hook", 1)
    assert list(again) == [job_id]


@pytest.mark.one_shard("the scripts are called on one shard")
async def test_scheduled_and_retried_keyed_jobs_come_back_to_their_key(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    later = await client.enqueue_in(0.2, "hook", key="t1", seq=0, fair_key="t1")
    record = await client.job(later.id)
    assert record is not None and (record.state, record.fair_key) == ("scheduled", "t1")
    tries: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def hook(ctx: JobContext, key: str, seq: int) -> None:
        tries.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Retry(delay=0.05)

    async with pool.running():
        await wait_until(lambda: len(tries) == 2, within=20)
    assert redis_sync.llen("{" + namespace + "}:queue:hook") == 0
    assert fair_keys_left(redis_sync, namespace) == []


@pytest.mark.one_shard("turns are counted within a shard")
async def test_plain_jobs_take_part_as_one_more_key(
    client: Client, redis_url: str, namespace: str
) -> None:
    plain = [JobSpec(name="hook", kwargs={"key": "-", "seq": i}) for i in range(60)]
    await enqueue(client, plain + keyed("a", 60) + keyed("b", 60))
    ran: Ledger = []
    async with ledger_pool(redis_url, namespace, ran, concurrency=1).running():
        await wait_until(lambda: len(ran) == 180, within=30)
    first = Counter(k for k, _ in ran[:90])
    assert first == {"-": 30, "a": 30, "b": 30}
    assert [s for k, s in ran if k == "-"] == list(range(60))


async def test_clear_key_and_clear_queue_count_keyed_jobs(client: Client) -> None:
    await enqueue(client, keyed("a", 30) + keyed("b", 20))
    await client.enqueue("hook", key="-", seq=0)
    assert await client.admin.fair.clear_key("hook", "a") == 30
    assert [(r.key, r.queued) for r in await client.admin.fair.of("hook")] == [("b", 20)]
    assert await client.admin.clear_queue("hook") == 21
    assert await client.admin.fair.of("hook") == []
    (q,) = await client.admin.queues(["hook"])
    assert q.size == 0


@pytest.mark.parametrize(
    ("setting", "value", "match"),
    [
        ("weight", 0, r"^weight: must be from 1 to 1000, got 0$"),
        ("weight", 1.5, r"^weight: must be a whole number"),
        ("limit", 10**7, r"^limit: must be from 1 to 1000000"),
        ("limit", float("nan"), r"^limit: must be a whole number"),
        ("key", "two words", r"^key must be 1 to 200 printable ASCII"),
    ],
)
async def test_settings_out_of_range_are_refused_in_one_line(
    client: Client, setting: str, value: object, match: str
) -> None:
    admin = client.admin
    calls_of: dict[str, Callable[[], Awaitable[None]]] = {
        "weight": lambda: admin.fair.set_weight("hook", "a", value),  # type: ignore[arg-type]
        "limit": lambda: admin.fair.set_key_limit("hook", "a", value),  # type: ignore[arg-type]
        "key": lambda: admin.fair.pause_key("hook", str(value)),
    }
    with pytest.raises(ValueError, match=match):
        await calls_of[setting]()
    with pytest.raises(ValueError, match=r"^rate: 'fast' is not a rate"):
        await client.admin.fair.set_key_rate("hook", "a", "fast")


@pytest.mark.one_shard("the keys are written in one shard")
async def test_garbage_in_every_key_never_stops_the_name(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    redis_sync.hset(
        p + "fset:hook",
        mapping={"w/a": "nan", "l/a": "1e300", "l*": "-5", "r/a": "fast", "w/b": "1e300"},
    )
    redis_sync.hset(p + "fair:hook", mapping={"vt": "nan", "n": "x", "t/a": "inf"})
    redis_sync.set(p + "fqueue:hook/c", "not a list")
    redis_sync.set(p + "frun:hook/b", "not a set")
    await enqueue(client, keyed("a", 10) + keyed("b", 10) + keyed("c", 10))
    redis_sync.zadd(p + "fkeys:hook", {"ghost": float("-inf")})  # a key with no list
    ran: Ledger = []
    async with ledger_pool(redis_url, namespace, ran, concurrency=4).running():
        await wait_until(lambda: len(ran) == 30, within=30)
    assert Counter(k for k, _ in ran) == {"a": 10, "b": 10, "c": 10}
    # a set of keys of another type, written while a pool runs, is moved away by the
    # repair after the fetch it fails, and its keys go on
    async with ledger_pool(redis_url, namespace, ran, concurrency=4).running():
        await enqueue(client, keyed("d", 5))
        redis_sync.delete(p + "fkeys:hook")
        redis_sync.set(p + "fkeys:hook", "garbage")
        await enqueue(client, keyed("e", 5))
        await wait_until(lambda: len(ran) == 40, within=30)
    assert list(redis_sync.scan_iter(match=p + "quarantine:fkeys:hook*"))


@pytest.mark.one_shard("the keys are read in one shard")
async def test_abort_retry_from_dead_and_a_released_child_keep_to_their_key(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    gone = await client.enqueue("hook", key="t1", seq=0, fair_key="t1")
    assert await client.abort(gone.id) == "queued"
    assert redis_sync.llen(p + "fqueue:hook/t1") == 0
    (q,) = await client.admin.queues(["hook"])
    assert q.size == 0
    parent = await client.enqueue("hook", key="t2", seq=0, fair_key="t2")
    child = await client.enqueue("hook", key="t3", seq=1, fair_key="t3", after=[parent.id])
    ran: Ledger = []
    async with ledger_pool(redis_url, namespace, ran).running():
        await wait_until(lambda: len(ran) == 2, within=20)
    assert ran == [("t2", 0), ("t3", 1)]
    child_record = await client.job(child.id)
    assert child_record is None or child_record.state == "complete"
    # a dead keyed job moved back goes into its key's list
    dead = await client.enqueue("hook", key="t4", seq=0, fair_key="t4")
    redis_sync.hset(p + "job:" + dead.id, "state", "dead")
    redis_sync.lrem(p + "fqueue:hook/t4", 0, dead.id)
    redis_sync.zadd(p + "dead", {dead.id: 1})
    assert await client.admin.retry("dead", [dead.id]) == 1
    assert redis_sync.lrange(p + "fqueue:hook/t4", 0, -1) == [dead.id.encode()]
    assert redis_sync.llen(p + "queue:hook") == 0


@pytest.mark.one_shard("the keys are read in one shard")
async def test_heartbeats_extend_a_keyed_lease_in_its_keys_running_set(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    await client.admin.fair.set_key_limit("hook", "t1", 1)  # the limit reads the key's set
    frun = "{" + namespace + "}:frun:hook/t1"
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, lease=1.0, heartbeat_interval=0.1)
    )
    release = anyio.Event()

    @pool.job
    async def hook(ctx: JobContext, key: str, seq: int) -> None:
        await release.wait()

    await client.enqueue_many(keyed("t1", 2))
    async with pool.running():
        await wait_until(lambda: redis_sync.zcard(frun) == 1, within=10)
        first = deadline(redis_sync, frun)
        await wait_until(lambda: deadline(redis_sync, frun) > first)
        rows = {r.key: (r.queued, r.running, r.limit) for r in await client.admin.fair.of("hook")}
        assert rows == {"t1": (1, 1, 1)}  # the second waits for the first's slot
        release.set()
        await wait_until(
            lambda: (
                redis_sync.zcard(frun) == 0
                and not redis_sync.exists("{" + namespace + "}:fqueue:hook/t1")
            )
        )


@pytest.mark.one_shard("the scripts are called on one shard")
@pytest.mark.parametrize("with_settings", [False, True])
async def test_a_backlog_written_wrong_neither_strands_a_key_nor_stops_its_name(
    client: Client, redis_sync: redis.Redis, namespace: str, with_settings: bool
) -> None:
    # A name without settings takes turns by its lists alone; one with settings learns a
    # key's jobs left from its backlog (less its pops): one reading too few is checked
    # against the list, one reading too many ends at an empty pop.
    if with_settings:
        await client.admin.fair.set_weight("hook", "t", 1)
    await enqueue(client, keyed("t", 3) + keyed("u", 2))
    p = "{" + namespace + "}:"
    redis_sync.zadd(p + "fbacklog:hook", {"t": 0, "u": 50})
    assert len(await lease_tokens(client, "hook", 1)) == 1  # t's (ties go by key)
    if with_settings:
        assert redis_sync.zscore(p + "fbacklog:hook", "t") == 2  # the list said
    assert redis_sync.zscore(p + "fkeys:hook", "t") is not None
    leased = 1
    for _ in range(6):
        leased += len(await lease_tokens(client, "hook", 1))
    assert leased == 5
    assert redis_sync.exists(p + "fkeys:hook", p + "fbacklog:hook") == 0
    assert await lease_tokens(client, "hook", 1) == {}


@pytest.mark.one_shard("the scripts are called on one shard")
async def test_a_keys_jobs_popped_at_once_go_back_in_order_when_the_fetch_fails(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    # A fetch pops a held key's entries several at a time, as many as the call may still
    # take of the name; a WRONGTYPE met after them (another name's running set, read at
    # its visit) puts every one back as it was.
    p = "{" + namespace + "}:"
    scope = client.admin.shards[0].scope
    await calls.register(scope, [("other", 1, 5, "")])
    await enqueue(client, keyed("a", 6))
    await client.enqueue("other")
    before = redis_sync.lrange(p + "fqueue:hook/a", 0, -1)
    redis_sync.delete(p + "running:other")
    redis_sync.set(p + "running:other", "string")
    lessee = calls.Lessee(30_000, "p", 1 << 20)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await calls.fetch(scope, lessee, ["hook", "other", "hook", "hook"], [])
    assert redis_sync.lrange(p + "fqueue:hook/a", 0, -1) == before
    assert redis_sync.zcard(p + "running:hook") == 0
    redis_sync.delete(p + "running:other")
    reply = await calls.fetch(scope, lessee, ["hook"] * 4, [])
    assert [job.id.encode() for job in reply.jobs] == before[::-1][:4]  # oldest first
    assert redis_sync.lrange(p + "fqueue:hook/a", 0, -1) == before[:2]
    # its backlog, the length at its last push, is not lowered by a fetch (protocol.md)
    assert redis_sync.zscore(p + "fbacklog:hook", "a") == 6


@pytest.mark.one_shard("the keys are read in one shard")
async def test_garbage_settings_and_backlog_read_as_the_defaults(
    client: Client, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    redis_sync.hset(
        p + "fset:hook",
        mapping={
            "w/a": "nan",
            "l/a": "1e300",
            "l*": "-5",
            "r/a": "9" * 400 + "/1000",
            "w/b": "1e300",
            "l/b": "text",
            "r/b": "fast",
            "p/b": "1",
        },
    )
    await enqueue(client, keyed("a", 3) + keyed("b", 1) + keyed("c", 2))
    redis_sync.zadd(p + "fbacklog:hook", {"a": 3, "b": float("inf"), "c": float("-inf")})
    redis_sync.set(p + "frun:hook/a", "not a set")
    rows = {r.key: r for r in await client.admin.fair.of("hook")}
    assert set(rows) == {"a", "b", "c"}
    a, b = rows["a"], rows["b"]
    assert (a.queued, a.running, a.limit, a.weight, a.paused, a.rate) == (
        3,
        0,
        None,
        1,
        False,
        None,
    )
    assert (b.limit, b.weight, b.paused, b.rate) == (None, 1, True, None)
    assert (b.queued, rows["c"].queued) == (1, 2)  # counted by their lists
