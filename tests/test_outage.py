"""A Redis that says "not now": out of memory, a replica, away at the start, or forgetful.

Each test runs a pool in this process against a private redis-server put in that state
for real (``CONFIG SET maxmemory`` below the memory in use, ``REPLICAOF``, a server
started late, ``FLUSHALL``), and counts every job.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any, cast

import anyio
import pytest
import redis
import redis.exceptions
from structlog.testing import capture_logs

from rota import Client, JobContext, JobSpec, RedisRefused, WorkerPool
from rota.redis import watch as watch_module
from rota.redis.outage import Condition, condition
from rota.redis.watch import Watch
from tests.helpers import fill_up, pool_settings, rounds, wait_until
from tests.redis_server import RedisServer, free_port
from tests.unit.test_outage_waits import events

NS = "full"


@pytest.fixture
def server(full_redis_server: RedisServer) -> RedisServer:
    return full_redis_server


def has_functions(r: redis.Redis) -> bool:
    return int(str(r.info("server")["redis_version"]).split(".")[0]) >= 7


def forget_scripts(r: redis.Redis) -> None:
    """What a restart without persistence does to rota's Lua: the library (Redis 7) and
    the script cache are gone."""
    if has_functions(r):
        r.function_flush()
    r.script_flush()


def counting_pool(**options: Any) -> tuple[WorkerPool, collections.Counter[str]]:
    pool = WorkerPool()
    runs: collections.Counter[str] = collections.Counter()

    @pool.job(**options)
    async def work(ctx: JobContext, i: int) -> str:
        runs[ctx.id] += 1
        return "r" * 100

    return pool, runs


def test_conditions_are_named_and_real_errors_are_not(server: RedisServer) -> None:
    r = server.client()
    r.set("s", "x")
    with pytest.raises(redis.exceptions.ResponseError, match=r"^WRONGTYPE ") as wrong_type:
        r.lpush("s", "y")
    assert condition(wrong_type.value) is None  # a bug, not a condition
    assert condition(redis.exceptions.AuthenticationError("bad")) is None
    assert condition(redis.exceptions.ConnectionError("gone")) is Condition.UNREACHABLE
    assert condition(redis.exceptions.ResponseError("BUSY Redis is busy")) is Condition.BUSY
    assert condition(redis.exceptions.ResponseError("UNBLOCKED x")) is Condition.READ_ONLY
    # uvloop, writing on a connection a killed cluster node closed: the pool once died of it
    closed = RuntimeError(
        "unable to perform operation on <TCPTransport closed=True reading=False 0x5>;"
        " the handler is closed"
    )
    assert condition(closed) is Condition.UNREACHABLE
    assert condition(RuntimeError("a bug of rota's")) is None
    fill_up(r)
    with pytest.raises(
        redis.exceptions.OutOfMemoryError, match="command not allowed when used memory"
    ) as oom:
        r.lpush("l", "y")
    assert condition(oom.value) is Condition.OUT_OF_MEMORY


async def test_a_condition_that_comes_and_goes_is_one_episode(server: RedisServer) -> None:
    """A Redis at its memory limit refuses one finish and takes the next, a hundred
    times a second: one line when it starts, and one when no task has been refused for
    ``settle`` seconds and a task gets through (not a pair per refusal)."""
    r = server.client()
    fill_up(r)
    with pytest.raises(
        redis.exceptions.OutOfMemoryError, match="command not allowed when used memory"
    ) as refused:
        r.set("more", "x")
    watch = Watch("p", settle=3600)
    with capture_logs() as logs:
        for _ in range(100):
            await watch.failed("acker", refused.value)
            watch.ok("acker")  # the held result got in
            watch.ok("heartbeat")
        assert watch.current is Condition.OUT_OF_MEMORY and watch.calm_for() >= 0
        watch.settle = 0.05

        def ended() -> bool:
            watch.ok("heartbeat")
            return watch.current is None

        await wait_until(ended)
        await watch.failed("acker", refused.value)  # a new episode
    assert len(events(logs, "Redis refuses writes: out of memory")) == 2
    (end,) = events(logs, "Redis takes every command again")
    assert end["condition"] == "out_of_memory" and end["pool"] == "p"


async def test_a_full_redis_is_drained_by_a_pool_that_starts_during_it(
    server: RedisServer,
) -> None:
    """keep_result=0: finishing frees memory. Producers get a clear error; pause, resume,
    and dead-job retry and delete work; after the limit is raised enqueues work again."""
    r = server.client()
    pool, runs = counting_pool(keep_result=0)
    pool.configure(pool_settings(server.url, NS, heartbeat_interval=0.2))
    async with Client.from_url(server.url, NS) as client:
        await client.enqueue("work", "not an int")  # dead: invalid_args
        async with pool.running(client=client):  # library loaded, names registered
            await wait_until(lambda: r.zcard("{full}:dead") == 1)
        await client.admin.pause("work")
        jobs = await client.enqueue_many([JobSpec(name="work", args=(i,)) for i in range(3000)])
        fill_up(r)
        with pytest.raises(RedisRefused, match="out of memory") as refused:
            await client.enqueue("work", 1)
        assert refused.value.condition == "out_of_memory"
        with pytest.raises(RedisRefused, match="0 of 2 jobs") as batch:
            await client.enqueue_many([JobSpec(name="work", args=(1,))] * 2)
        assert batch.value.written == 0
        with capture_logs() as logs:
            async with pool.running(client=client):
                await rounds(pool)  # a fetch while full and paused
                assert r.llen("{full}:queue:work") == 3000  # paused
                await client.admin.resume("work")
                (dead_id,) = [i.decode() for i in cast(list[bytes], r.zrange("{full}:dead", 0, -1))]
                assert await client.admin.retry("dead", [dead_id]) == 1
                await wait_until(lambda: len(runs) == len(jobs), within=30)
                await wait_until(lambda: r.zcard("{full}:dead") == 1)
                assert await client.admin.delete("dead", [dead_id]) == 1
                r.config_set("maxmemory", "0")
                later = await client.enqueue("work", 7)
                await wait_until(lambda: later.id in runs)
                await wait_until(lambda: bool(events(logs, "Redis takes every command")))
    assert set(runs) == {j.id for j in jobs} | {later.id}
    assert max(runs.values()) == 1
    (start,) = events(logs, "Redis refuses writes: out of memory")
    assert start["maxmemory_policy"] == "noeviction" and start["maxmemory"]
    assert "pools keep running" in start["event"]
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")]


async def test_a_kept_result_waits_for_memory_and_its_job_never_runs_twice(
    server: RedisServer,
) -> None:
    """A finish that would grow memory is held, its lease extended by the heartbeat (the
    lease is shorter than the wait), and the pool fetches no more than it can hold."""
    r = server.client()
    pool, runs = counting_pool(keep_result=3600)
    pool.configure(pool_settings(server.url, NS, lease=1, heartbeat_interval=0.2))
    async with Client.from_url(server.url, NS) as client:
        jobs = await client.enqueue_many([JobSpec(name="work", args=(i,)) for i in range(300)])
        async with pool.running(client=client):
            fill_up(r)
            await anyio.sleep(3)  # three leases long
            held = len(runs)
            # Concurrency 10: until the first refused finish tells the pool (fetching
            # does not wait for finishes that get through), what it fetched runs (a
            # fetch leases at most 32); after it, the pool fetches nothing more.
            assert 0 < held <= 60
            assert r.llen("{full}:queue:work") >= 300 - held - 20
            r.config_set("maxmemory", "0")
            await wait_until(lambda: len(runs) == 300, within=30)
            await wait_until(lambda: r.zcard("{full}:running:work") == 0)
        states = collections.Counter(
            r.hget(f"{{full}}:job:{j.id}", "state") for j in jobs
        )  # fmt: skip
    assert states == {b"complete": 300}
    assert max(runs.values()) == 1


async def test_a_pool_starts_on_a_full_redis_without_its_library(server: RedisServer) -> None:
    """FUNCTION LOAD is refused: the pool calls the scripts by EVALSHA and still runs."""
    r = server.client()
    pool, runs = counting_pool(keep_result=0)
    pool.configure(pool_settings(server.url, NS))
    async with Client.from_url(server.url, NS) as client:
        jobs = await client.enqueue_many([JobSpec(name="work", args=(i,)) for i in range(50)])
        forget_scripts(r)
        fill_up(r)
        with capture_logs() as logs:
            async with pool.running(client=client):
                await wait_until(lambda: len(runs) == 50, within=20)
    assert set(runs) == {j.id for j in jobs}
    if has_functions(r):  # Redis 6.2 has none: scripts are called by EVALSHA as ever
        (line,) = events(logs, "function library not loaded")
        assert line["cause"] == "Redis is out of memory"
        # EVALSHA of the scripts with their flags, on this client only
        assert (
            client.admin.shards[0].script_mode.functions,
            client.admin.shards[0].script_mode.flagged,
        ) == (False, True)


async def test_a_replica_is_waited_out_and_the_pool_carries_on() -> None:
    with RedisServer() as primary, RedisServer() as other:
        r = primary.client()
        pool, runs = counting_pool(keep_result=0)
        pool.configure(pool_settings(primary.url, NS, heartbeat_interval=0.2, wake_timeout=1))
        with capture_logs() as logs:
            async with Client.from_url(primary.url, NS) as client, pool.running(client=client):
                first = await client.enqueue("work", 1)
                await wait_until(lambda: first.id in runs)
                r.replicaof("127.0.0.1", other.port)
                await wait_until(lambda: bool(events(logs, "Redis refuses writes: the server")))
                await anyio.sleep(1)
                r.replicaof("NO", "ONE")
                second = await client.enqueue("work", 2)
                await wait_until(lambda: second.id in runs, within=20)
                await wait_until(lambda: bool(events(logs, "Redis takes every command")))
    assert runs == {first.id: 1, second.id: 1}


async def test_a_pool_waits_for_redis_at_its_start_and_can_be_stopped_meanwhile() -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    pool, runs = counting_pool(keep_result=0)
    pool.configure(pool_settings(url, NS))
    stop = anyio.Event()
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.run(shutdown=stop))
            await wait_until(lambda: bool(events(logs, "Redis cannot be reached")))
            stop.set()  # no Redis yet: the start is abandoned and run returns
    assert events(logs, "stopped before Redis could be used")
    (away,) = events(logs, "Redis cannot be reached")  # one line, naming what to check
    assert away["redis_url"] == url and "redis_url" in away["check"]
    done = anyio.Event()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.run(shutdown=done))
            await anyio.sleep(0.5)
            with RedisServer(port=port) as late:
                async with Client.from_url(late.url, NS) as client:
                    job = await client.enqueue("work", 1)
                    await wait_until(lambda: job.id in runs)
                done.set()
    assert runs == {job.id: 1}


class _Waits:
    """``anyio`` as rota.redis.watch sees it, noting how long each task that Redis
    refused waits before it tries again (``failed`` names the task just before, in the
    same asyncio task: several shards' tasks fail at once)."""

    def __init__(self) -> None:
        self.task: dict[asyncio.Task[Any] | None, str] = {}
        self.waits: list[tuple[str, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(anyio, name)

    def move_on_after(self, delay: float) -> anyio.CancelScope:
        self.waits.append((self.task.get(asyncio.current_task(), ""), delay))
        return anyio.move_on_after(delay)


async def test_a_pool_away_at_its_start_tries_again_as_often_as_a_heartbeat_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool whose Redis is away when it starts tries again every probe interval, as a
    running pool's heartbeat does, not after a backoff that grew to 5 s: a pool started
    while a cluster's primary was down started that shard up to 5 s after the replica
    took over (bench.cluster_checks down), where a running pool was back within 0.05 s."""
    waits = _Waits()
    real_failed = Watch.failed

    async def failed(self: Watch, task: str, exc: BaseException, **options: Any) -> float:
        waits.task[asyncio.current_task()] = task
        return await real_failed(self, task, exc, **options)

    monkeypatch.setattr(watch_module, "anyio", waits)
    monkeypatch.setattr(Watch, "failed", failed)
    port = free_port()
    pool, runs = counting_pool(keep_result=0)
    pool.configure(pool_settings(f"redis://127.0.0.1:{port}/0", NS))
    done = anyio.Event()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.run(shutdown=done))
            await wait_until(lambda: len(waits.waits) >= 5)
            with RedisServer(port=port) as late:
                async with Client.from_url(late.url, NS) as client:
                    job = await client.enqueue("work", 1)
                    await wait_until(lambda: job.id in runs)
                done.set()
    starts = [delay for task, delay in waits.waits if task == "start"]
    assert len(starts) >= 5, waits.waits
    assert set(starts) == {watch_module.PROBE_INTERVAL}, starts


async def test_a_redis_that_forgot_gets_the_pools_limits_back(server: RedisServer) -> None:
    """Restarted without persistence (here: flushed), Redis has no limits, names or
    priorities: the next heartbeat writes them again, so a limit of 1 holds again."""
    r = server.client()
    pool = WorkerPool()
    running = 0
    most = 0

    @pool.job(max_concurrency=1, priority=7, keep_result=0)
    async def slow(ctx: JobContext) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.05)
        running -= 1

    pool.configure(pool_settings(server.url, NS, heartbeat_interval=0.2))
    with capture_logs() as logs:
        async with Client.from_url(server.url, NS) as client, pool.running(client=client):
            assert r.hget("{full}:limits", "slow") == b"1"
            r.flushall()
            forget_scripts(r)
            await wait_until(lambda: r.hget("{full}:limits", "slow") == b"1", within=5)
            assert r.hget("{full}:priorities", "slow") == b"7"
            assert r.sismember("{full}:names", "slow")
            await client.enqueue_many([JobSpec(name="slow")] * 10)
            await wait_until(lambda: r.llen("{full}:queue:slow") == 0, within=10)
            await wait_until(lambda: running == 0)
    assert most == 1
    assert events(logs, "Redis had lost this pool's job names")


async def test_a_handler_writing_progress_and_logs_on_a_full_redis_completes(
    server: RedisServer,
) -> None:
    """checkin, progress and log are skipped when Redis refuses them, not the job."""
    r = server.client()
    pool = WorkerPool()
    done: list[str] = []

    @pool.job(keep_result=0)
    async def chatty(ctx: JobContext) -> None:
        await ctx.checkin("busy")
        await ctx.progress(50, "half")
        await ctx.job_log("a line")
        done.append(ctx.id)

    pool.configure(pool_settings(server.url, NS))
    async with Client.from_url(server.url, NS) as client:
        jobs = await client.enqueue_many([JobSpec(name="chatty")] * 20)
        async with pool.running(client=client):
            await wait_until(lambda: r.llen("{full}:queue:chatty") == 0)  # the library is loaded
        more = await client.enqueue_many([JobSpec(name="chatty")] * 20)
        fill_up(r)
        async with pool.running(client=client):
            await wait_until(lambda: len(done) == 40)
    assert sorted(done) == sorted(j.id for j in [*jobs, *more])
    assert r.zcard("{full}:dead") == 0
