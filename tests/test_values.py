"""What an enqueue refuses: values JSON would change, and options out of range."""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import link_of, pool_settings, wait_until


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@dataclasses.dataclass
class _Point:
    x: float
    tags: dict[Any, Any]


class _Shape(msgspec.Struct):
    x: float
    tags: dict[Any, Any]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (b"\x00hi", "bytes cannot travel in JSON"),
        (bytearray(b"x"), "bytes cannot travel in JSON"),
        (float("nan"), "nan cannot travel in JSON"),
        (math.inf, "inf cannot travel in JSON"),
        ({1, 2}, "a set cannot travel in JSON"),
        (frozenset({1}), "a set cannot travel in JSON"),
        (object(), "type object cannot travel in JSON"),
        ({1: "a"}, "key 1 is not a string"),
        ([1, {"deep": [float("-inf")]}], "[1]['deep'][0]: -inf"),
        (_Point(math.nan, {}), ".x: nan cannot travel in JSON"),
        (_Point(1.0, {1: "a"}), ".tags: key 1 is not a string"),
        (_Shape(math.inf, {}), ".x: inf cannot travel in JSON"),
        ([_Shape(1.0, {"k": [_Point(math.nan, {})]})], "[0].tags['k'][0].x: nan"),
        ("\ud800", "'\\ud800' at 0 is a lone surrogate"),
        (_nested(600), "nests more than 500 levels deep"),
        ({"k": ["ok", "a\udc00"]}, "['k'][1]: '\\udc00' at 1 is a lone surrogate"),
    ],
)
async def test_values_json_would_change_are_refused_naming_the_argument(
    client: Client, redis_sync: Any, namespace: str, value: Any, words: str
) -> None:
    with pytest.raises(TypeError, match="argument 'data'") as by_name:
        await client.enqueue("job", data=value)
    assert words in str(by_name.value)
    with pytest.raises(TypeError, match="argument 1"):
        await client.enqueue("job", "fine", value)
    with pytest.raises(TypeError, match="argument 0"):
        await client.enqueue_many([JobSpec(name="job", args=(value,))])
    assert redis_sync.keys("{" + namespace + "}:*") == []  # nothing written


async def test_datetimes_travel_as_text_and_come_back_for_a_typed_parameter(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))
    seen: dict[str, Any] = {}

    @pool.job
    async def typed(ctx: JobContext, when: datetime, key: uuid.UUID) -> None:
        seen["typed"] = (when, key)

    @pool.job
    async def untyped(ctx: JobContext, when: Any) -> None:
        seen["untyped"] = when

    when = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    key = uuid.uuid4()
    await client.enqueue("typed", when=when, key=key)
    await client.enqueue("untyped", when=when)
    async with pool.running(client=client):
        await wait_until(lambda: len(seen) == 2)
    assert seen["typed"] == (when, key)
    assert seen["untyped"] == "2026-11-22T09:30:00Z"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"timeout": 0}, "timeout must be at least 0.001 seconds"),
        ({"timeout": -1.5}, "timeout must be at least 0.001 seconds"),
        ({"timeout": float("nan")}, "timeout must be a finite number"),
        ({"max_fails": 0}, "max_fails must be at least 1"),
        ({"max_fails": 1.5}, "max_fails must be an integer"),
        ({"delay": float("inf")}, "delay must be a finite number"),
        ({"run_at": float("nan")}, "run_at must be a finite number"),
    ],
)
async def test_options_out_of_range_are_refused_naming_the_option(
    client: Client, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        await client.enqueue_many([JobSpec(name="job", **options)])


async def test_a_nan_delay_names_the_delay(client: Client) -> None:
    with pytest.raises(ValueError, match="delay must be a finite number"):
        await client.enqueue_in(float("nan"), "job")


async def test_a_naive_datetime_is_utc(client: Client) -> None:
    naive = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
    job = await client.enqueue_at(naive, "job")
    record = await client.job(job.id)
    assert record is not None and record.run_at is not None
    assert abs(record.run_at - naive.replace(tzinfo=UTC).timestamp()) < 0.001  # stored in ms


async def test_job_logs_are_read_from_the_client(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def chatty(ctx: JobContext) -> None:
        await ctx.job_log("first")
        await ctx.job_log("second")

    job = await client.enqueue("chatty")
    async with pool.running(client=client):
        await wait_until(lambda: _complete(client, job.id))
    assert await client.job_log(job.id) == ["first", "second"]
    assert await client.job_log("no-such-job") == []


async def _complete(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == "complete"


async def test_from_url_passes_connection_options(redis_url: str, redis_sync: Any) -> None:
    redis_sync.execute_command("ACL", "SETUSER", "opt-user", "on", ">opt-pass", "~*", "+@all")
    try:
        async with Client.from_url(
            redis_url, "opts", username="opt-user", password="opt-pass", socket_timeout=3
        ) as c:
            redis = c.admin.shards[0].redis
            assert await redis.execute_command("ACL", "WHOAMI") == b"opt-user"  # type: ignore[no-untyped-call]
            kwargs = redis.connection_pool.connection_kwargs
            assert kwargs["socket_timeout"] == 3
            link = link_of(c)
            assert link is not None  # the hot-path link connects as the same user
            assert await link.execute_command("ACL", "WHOAMI") == b"opt-user"
    finally:
        redis_sync.execute_command("ACL", "DELUSER", "opt-user")


@pytest.mark.parametrize(
    "enqueue",
    [
        lambda c: c.enqueue_at(time.time() * 1000, "x"),
        lambda c: c.enqueue_in(1e12, "x"),
        lambda c: c.enqueue_many([JobSpec(name="x", run_at=time.time() * 1000)]),
        lambda c: c.enqueue_many([JobSpec(name="x", delay=time.time() * 1000 * 1000)]),
        lambda c: c.enqueue_at(-1.0, "x"),
    ],
)
async def test_a_time_in_milliseconds_is_refused_not_scheduled_for_year_56841(
    client: Client, enqueue: Any
) -> None:
    """``time.time() * 1000`` scheduled a job 56,841 years ahead; every entry point
    refuses what is not a time from 1970 to 9999 in seconds, or a delay from 0 to ten
    years, as the HTTP API does."""
    with pytest.raises(ValueError, match=r"(run_at|delay): .*(1970 to 9999|from 0 to 315360000)"):
        await enqueue(client)
    assert await client.admin.shards[0].redis.zcard(client.admin.shards[0].keys.scheduled) == 0


async def test_a_wait_that_times_out_says_which_job_and_for_how_long(client: Client) -> None:
    job = await client.enqueue("nobody_runs_this")
    with pytest.raises(TimeoutError, match=rf"job {job.id} did not finish within 0.1 s"):
        await client.wait(job.id, timeout=0.1)


@pytest.mark.parametrize("seconds", [1e-320, 0.0005, 0.0, -1.0])
async def test_a_timeout_below_a_millisecond_is_refused(client: Client, seconds: float) -> None:
    """``"timeout": 1e-320`` is a positive number, and no time a job can run in."""
    with pytest.raises(ValueError, match=r"timeout must be at least 0\.001 seconds"):
        await client.enqueue("x", timeout=seconds)
    assert await client.admin.shards[0].redis.llen(client.admin.shards[0].keys.queue("x")) == 0
