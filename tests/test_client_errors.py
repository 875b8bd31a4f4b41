"""A client's calls raise rota's errors, not redis-py's: :class:`rota.RedisUnavailable`
for a server that is away, :class:`rota.RedisRefused` for an error reply, the
redis-py error kept as the cause (see ``rota.redis.outage.guarded``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Iterator, Mapping
from typing import Any

import pytest
import redis.exceptions

from rota import Client, JobContext, RedisRefused, RedisUnavailable, State, WorkerPool, inspect
from rota.errors import redis_cause
from rota.redis.outage import Condition
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer(["--maxmemory-policy", "noeviction"]) as s:
        yield s


async def test_a_stopped_server_is_rota_unavailable(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.admin.pause("x")
        server.stop()
        admin = client.admin
        calls: list[Awaitable[object]] = [admin.queues(), client.job("a"), admin.pause("x")]
        calls += [admin.jobs.to_front("a"), admin.fair.of("x"), admin.commands.read()]
        calls += [admin.run_times.of("x")]
        for call in calls:  # the admin's parts too
            with pytest.raises(RedisUnavailable, match=r"^Redis cannot be reached: ") as raised:
                await call
            assert isinstance(raised.value.__cause__, redis.exceptions.ConnectionError)
        # the reads of rota.inspect too
        with pytest.raises(RedisUnavailable, match=r"^Redis cannot be reached: "):
            await inspect.job_view(client, "a")


async def test_a_full_server_is_rota_refused_naming_oom(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.enqueue("x")
        await client.admin.shards[0].redis.config_set("maxmemory", "1")
        with pytest.raises(RedisRefused, match="OOM") as raised:
            await client.enqueue("x")
        assert raised.value.condition == Condition.OUT_OF_MEMORY
        with pytest.raises(RedisRefused, match="OOM") as raised:
            await client.admin.set_limit("x", 3)  # a write of the operator's too
        assert raised.value.condition == Condition.OUT_OF_MEMORY
        await client.admin.shards[0].redis.config_set("maxmemory", "0")


async def test_an_error_reply_that_waiting_does_not_mend(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.admin.shards[0].redis.set(
            client.admin.shards[0].keys.group_members("g"), "not a list"
        )
        with pytest.raises(RedisRefused, match="WRONGTYPE") as raised:
            await client.admin.group_members("g")
        assert raised.value.condition == ""
        assert isinstance(raised.value.__cause__, redis.exceptions.ResponseError)


async def test_a_read_the_server_refuses_is_not_read_as_no_job(server: RedisServer) -> None:
    """A key of another type is no job (None); a refusal (here NOPERM) is an error, never
    a silent "no such job" that an operator would believe."""
    async with Client.from_url(server.url, "t", ride_through=0) as admin:
        job = await admin.enqueue("x")
        await admin.admin.shards[0].redis.set(admin.admin.shards[0].keys.job("other"), "not a hash")
        assert await admin.job("other") is None
        assert await admin.admin.stored("other", "args") is None
        await admin.admin.shards[0].redis.acl_setuser(
            "reader",
            enabled=True,
            passwords=["+pw"],
            keys=["*"],
            commands=["+@all", "-hgetall", "-hmget"],
        )
    url = server.url.replace("redis://", "redis://reader:pw@")
    async with Client.from_url(url, "t", ride_through=0) as reader:
        with pytest.raises(RedisRefused, match="NOPERM"):
            await reader.job(job.id)
        with pytest.raises(RedisRefused, match="NOPERM"):
            await reader.admin.stored(job.id, "args")


async def test_a_handler_meets_rotas_error_for_a_write_redis_refuses(server: RedisServer) -> None:
    """A job's own write that Redis refuses for good (here its log's key holds another
    type) reaches the handler as rota.RedisRefused, as a client's call would."""
    pool = WorkerPool(settings=pool_settings(server.url, "t", keep_result=60))
    seen: list[str] = []

    @pool.job
    async def logs(ctx: JobContext) -> None:
        try:
            await ctx.job_log("a line")
        except RedisRefused as exc:
            seen.append(f"rota {exc.condition!r} {redis_cause(exc).__class__.__name__}")
        except redis.exceptions.ResponseError:
            seen.append("redis-py")

    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.admin.shards[0].redis.set(
            client.admin.shards[0].keys.joblog("j1"), "not a list"
        )
        await client.enqueue("logs", job_id="j1")
        async with pool.running(client=client):
            await wait_until(lambda: _done(client, "j1"))
    assert seen == ["rota '' ResponseError"]


async def _done(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == State.COMPLETE


async def test_a_pool_that_redis_refuses_to_start_raises_rotas_error(server: RedisServer) -> None:
    """A wrong password stops a pool's start at once with rota.RedisRefused, redis-py's
    error its cause: a program embedding a pool catches rota's errors only."""
    server.client().config_set("requirepass", "right")
    url = f"redis://:wrong@127.0.0.1:{server.port}/0"
    pool = WorkerPool(settings=pool_settings(url, "t"))

    @pool.job
    async def nothing(ctx: JobContext) -> None:
        return None

    with pytest.raises(RedisRefused, match="invalid username-password") as raised:
        async with pool.running():
            pytest.fail("the pool started")
    assert isinstance(raised.value.__cause__, redis.exceptions.AuthenticationError)


async def test_a_lifespan_that_fails_reaches_the_caller_as_it_is(server: RedisServer) -> None:
    """Only the pool's own start becomes rota's error: a lifespan that cannot open its
    file (an OSError, as a lost connection is) raises what it raised."""
    pool = WorkerPool(settings=pool_settings(server.url, "t"))

    @pool.job
    async def nothing(ctx: JobContext) -> None:
        return None

    @pool.lifespan
    async def resources() -> AsyncGenerator[Mapping[str, Any], None]:
        open("/nonexistent/model.bin", "rb").close()  # noqa: ASYNC230 - it fails at once
        yield {}

    with pytest.raises(FileNotFoundError, match=r"/nonexistent/model\.bin"):
        async with pool.running():
            pytest.fail("the pool started")
