"""A client's calls raise rota's errors, not redis-py's: :class:`rota.RedisUnavailable`
for a server that is away, :class:`rota.RedisRefused` for an error reply, the
redis-py error kept as the cause (see ``rota.redis.outage.guarded``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis.exceptions

from rota import Client, RedisRefused, RedisUnavailable, inspect
from rota.redis.outage import Condition
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer(["--maxmemory-policy", "noeviction"]) as s:
        yield s


async def test_a_stopped_server_is_rota_unavailable(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.pause("x")
        server.stop()
        for call in (client.queues(), client.job("a"), client.pause("x")):
            with pytest.raises(RedisUnavailable) as raised:
                await call
            assert isinstance(raised.value.__cause__, redis.exceptions.ConnectionError)
        with pytest.raises(RedisUnavailable):  # the reads of rota.inspect too
            await inspect.job_view(client, "a")


async def test_a_full_server_is_rota_refused_naming_oom(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.enqueue("x")
        await client.redis.config_set("maxmemory", "1")
        with pytest.raises(RedisRefused, match="OOM") as raised:
            await client.enqueue("x")
        assert raised.value.condition == Condition.OUT_OF_MEMORY
        with pytest.raises(RedisRefused, match="OOM") as raised:
            await client.set_limit("x", 3)  # a write of the operator's too
        assert raised.value.condition == Condition.OUT_OF_MEMORY
        await client.redis.config_set("maxmemory", "0")


async def test_an_error_reply_that_waiting_does_not_mend(server: RedisServer) -> None:
    async with Client.from_url(server.url, "t", ride_through=0) as client:
        await client.redis.set(client.keys.group_members("g"), "not a list")
        with pytest.raises(RedisRefused, match="WRONGTYPE") as raised:
            await client.group_members("g")
        assert raised.value.condition == ""
        assert isinstance(raised.value.__cause__, redis.exceptions.ResponseError)


async def test_a_read_the_server_refuses_is_not_read_as_no_job(server: RedisServer) -> None:
    """A key of another type is no job (None); a refusal (here NOPERM) is an error, never
    a silent "no such job" that an operator would believe."""
    async with Client.from_url(server.url, "t", ride_through=0) as admin:
        job = await admin.enqueue("x")
        await admin.redis.set(admin.keys.job("other"), "not a hash")
        assert await admin.job("other") is None
        assert await admin.stored("other", "args") is None
        await admin.redis.acl_setuser(
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
            await reader.stored(job.id, "args")
