"""The job record's layout (protocol v3): a new job holds no zero counters, and a job
written with them (protocol v2, or plain commands written for it) runs the same way.

During an upgrade producers of both versions write into the same queues; a v3 pool must
count attempts and failures from either record alike, and fence its outcomes with the
token either way.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

import msgspec
import pytest
import redis

from rota import Client, JobContext, Retry, State, WorkerPool
from rota.protocol.scripts import script
from tests.helpers import finish_args, lease_tokens, pool_settings, wait_until


def _v2_enqueue(redis_sync: redis.Redis, client: Client, name: str) -> str:
    """A job as protocol v2 wrote it: the zero counters and token spelled out."""
    job_id = uuid.uuid4().hex
    pipe = redis_sync.pipeline(transaction=True)
    now = int(time.time() * 1000)
    zeros = ("attempts", 0, "failures", 0, "lost", 0, "token", 0)  # v3 leaves them out
    pipe.hset(client.admin.shards[0].keys.job(job_id), items=list(zeros))
    pipe.hset(
        client.admin.shards[0].keys.job(job_id),
        mapping={"name": name, "args": "[]", "state": "queued"},
    )
    pipe.hset(client.admin.shards[0].keys.job(job_id), "enqueued_at", now)
    pipe.lpush(client.admin.shards[0].keys.queue(name), job_id)
    pipe.sadd(client.admin.shards[0].keys.names, name)
    pipe.sadd(client.admin.shards[0].keys.ready, name)
    pipe.lpush(client.admin.shards[0].keys.wake(name), 1)
    pipe.execute()
    return job_id


def _pexpires(redis_sync: redis.Redis) -> int:
    row = redis_sync.info("commandstats").get("cmdstat_pexpire")
    return int(row["calls"]) if row else 0


async def test_a_new_record_holds_no_zero_counters(client: Client, redis_sync: redis.Redis) -> None:
    # Nor the state while it is queued (protocol v4): a record with a name and no state
    # is queued; and its id is 17 letters and digits, so that its key fits 32 bytes.
    job = await client.enqueue("flaky", 1)
    assert len(job.id) == 17 and job.id.isalnum()
    fields = cast(dict[bytes, bytes], redis_sync.hgetall(client.admin.shards[0].keys.job(job.id)))
    # (a process whose tracing is on, after tests that set a tracer provider, adds the
    # enqueue's trace context)
    assert set(fields) - {b"traceparent", b"tracestate"} == {b"name", b"args", b"enqueued_at"}
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.attempts, record.failures, record.lost) == ("queued", 0, 0, 0)


async def test_records_of_both_layouts_count_attempts_and_failures_alike(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    attempts: dict[str, list[int]] = {}
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job(max_fails=5)
    async def flaky(ctx: JobContext) -> str:
        attempts.setdefault(ctx.id, []).append(ctx.attempt)
        if len(attempts[ctx.id]) < 3:
            raise Retry(0.01)
        return "done"

    new = (await client.enqueue("flaky")).id
    old = _v2_enqueue(redis_sync, client, "flaky")
    async with pool.running():

        async def both_done() -> bool:
            records = [await client.job(i) for i in (new, old)]
            return all(r is not None and r.state == "complete" for r in records)

        await wait_until(both_done, within=15)
    for job_id in (new, old):
        assert attempts[job_id] == [1, 2, 3]
        record = await client.job(job_id)
        assert record is not None
        assert (record.attempts, record.failures, record.lost) == (3, 2, 0)
        assert record.result_value == "done"


async def test_log_lines_expire_with_the_job_and_cost_nothing_when_absent(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))

    @pool.job
    async def talks(ctx: JobContext) -> str:
        await ctx.job_log("a line")
        return "ok"

    job = await client.enqueue("talks")
    async with pool.running():

        async def complete() -> bool:
            record = await client.job(job.id)
            return record is not None and record.state == "complete"

        await wait_until(complete, within=10)
    assert await client.job_log(job.id) == ["a line"]
    assert 500_000 < redis_sync.pttl(client.admin.shards[0].keys.joblog(job.id)) <= 600_000


async def test_a_finish_expires_a_log_only_where_there_may_be_one(
    client: Client, redis_sync: redis.Redis
) -> None:
    """One PEXPIRE for a job without lines, two with them."""
    first, logged = [(await client.enqueue("n")).id for _ in range(2)]
    redis_sync.hset(client.admin.shards[0].keys.job(logged), "logged", "1")
    now = int(time.time() * 1000)
    tokens = await lease_tokens(client, "n", 2)
    for job_id, expected in ((first, 1), (logged, 2)):
        before = _pexpires(redis_sync)
        outcome: list[str | int] = [job_id, "n", tokens[job_id], "complete", "", 600_000, ""]
        stale = await script("finish")(
            client.admin.shards[0].redis,
            client.admin.shards[0].keys.prefix,
            finish_args(now, outcome),
            client.admin.shards[0].script_mode,
        )
        assert stale == []
        assert _pexpires(redis_sync) - before == expected, job_id


async def test_a_record_reads_its_state_as_a_state(client: Client, redis_sync: redis.Redis) -> None:
    """Every record's state is a ``State``; one no rota script wrote reads as UNKNOWN."""
    job = await client.enqueue("flaky")
    record = await client.job(job.id)
    assert record is not None and record.state is State.QUEUED
    for odd in ("", "half-done"):
        redis_sync.hset(
            client.admin.shards[0].keys.job("odd"), mapping={"name": "flaky", "state": odd}
        )
        odd_record = await client.job("odd")
        assert odd_record is not None and odd_record.state is State.UNKNOWN
    # No state: queued when the record has a name (protocol v4), else unknown.
    redis_sync.hset(
        client.admin.shards[0].keys.job("plain"), mapping={"name": "flaky", "args": "[]"}
    )
    redis_sync.hset(client.admin.shards[0].keys.job("nameless"), mapping={"args": "[]"})
    assert [(await client.job(i)).state for i in ("plain", "nameless")] == [  # type: ignore[union-attr]
        State.QUEUED,
        State.UNKNOWN,
    ]


async def test_a_finish_refuses_a_flat_array_cut_short(
    client: Client, redis_sync: redis.Redis
) -> None:
    """A flat array that is not seven entries per attempt, or any other form (seven
    arguments per attempt, a MessagePack value that is no array) is a sender's mistake:
    refused whole (a whole attempt before the short one is not recorded either), so the
    leases stay for the reaper."""
    ids = [(await client.enqueue("n")).id for _ in range(2)]
    tokens = await lease_tokens(client, "n", 2)
    now = int(time.time() * 1000)
    whole = [ids[0], "n", tokens[ids[0]], "complete", "", 600_000, ""]
    cut = msgspec.msgpack.encode([*whole, ids[1], "n", tokens[ids[1]], "complete", ""])
    refused: list[tuple[list[Any], str]] = [
        ([now, cut, 100_000], "not seven entries each"),
        ([now, msgspec.msgpack.encode("complete"), 100_000], "not seven entries each"),
        ([now, *whole], "not 8 arguments"),
        ([now, *whole, *whole], "not 15 arguments"),
    ]
    for args, refusal in refused:
        with pytest.raises(redis.exceptions.ResponseError, match=refusal):
            await script("finish")(
                client.admin.shards[0].redis,
                client.admin.shards[0].keys.prefix,
                args,
                client.admin.shards[0].script_mode,
            )
    for job_id in ids:
        record = await client.job(job_id)
        assert record is not None and record.state == State.RUNNING
        assert redis_sync.zscore(client.admin.shards[0].keys.running("n"), job_id) is not None
    assert (await client.admin.stats()).get("processed", 0) == 0
