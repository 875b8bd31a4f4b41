"""Whatever others write into Redis ends as a dead job with a reason; the pool goes on."""

from __future__ import annotations

from functools import partial

import anyio
import msgspec
import pytest
import redis
from redis.typing import EncodableT, FieldT

from rota import Client, JobContext, WorkerPool
from rota.cli import main
from rota.protocol import calls
from rota.protocol.job import Reason, now_ms
from rota.protocol.rows import Dead
from tests.helpers import finish_args, pool_settings, wait_until

Fields = dict[FieldT, EncodableT]  # a job hash as redis-py takes it


async def test_planted_garbage_becomes_dead_jobs_with_reasons(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    p = "{" + namespace + "}:"
    q = p + "queue:work"
    r = redis_sync
    r.lpush(q, "not an id: spaces & symbols!")
    r.lpush(q, "x" * 5000)
    r.lpush(q, b"\xff\xfe\x00binary")
    r.lpush(q, "no-record")
    r.hset(p + "job:only-name", "name", "work")
    r.lpush(q, "only-name")
    r.hset(p + "job:bad-json", mapping={"name": "work", "args": "{not json"})
    r.lpush(q, "bad-json")
    r.hset(p + "job:scalar", mapping={"name": "work", "args": "42"})
    r.lpush(q, "scalar")
    huge = msgspec.json.encode({"blob": "y" * (1024 * 1024)})
    r.hset(p + "job:huge", mapping={"name": "work", "args": huge})
    r.lpush(q, "huge")
    r.hset(p + "job:wrong-name", mapping={"name": "other", "args": "{}"})
    r.lpush(q, "wrong-name")
    r.set(p + "job:a-string", "surprise")
    r.lpush(q, "a-string")
    odd: Fields = {"attempts": "many", "token": "x", "max_fails": "lots", "timeout": "?"}
    r.hset(p + "job:bad-numbers", mapping={"name": "work", "args": "{}", **odd})
    r.lpush(q, "bad-numbers")
    r.hset(p + "job:unknown", mapping={"name": "nobody", "args": "{}"})
    r.lpush(p + "queue:nobody", "unknown")
    r.zadd(p + "scheduled", {"ghost": 0})

    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.append(ctx.id)

    good = [await client.enqueue("work") for _ in range(20)]
    async with pool.running():
        await wait_until(lambda: len(ran) == 21)
        await wait_until(lambda: _dead_at_least(client, 11))
        more = [await client.enqueue("work") for _ in range(5)]
        await wait_until(lambda: len(ran) == 26)

    assert set(ran) == {j.id for j in good + more} | {"bad-numbers"}
    dead = {j.id: j for j in (await client.admin.page("dead", count=100)).jobs}
    reasons = {jid: (j.reason, j.error) for jid, j in dead.items()}
    assert len(dead) == 11, reasons
    assert all(reason == "bad_payload" for reason, _ in reasons.values()), reasons
    assert reasons["no-record"][1] == "job record missing"
    assert reasons["only-name"][1] == "job has no args"
    assert "not valid JSON" in (reasons["bad-json"][1] or "")
    assert "JSON array or object" in (reasons["scalar"][1] or "")
    assert "exceed the limit" in (reasons["huge"][1] or "")
    assert "does not match queue" in (reasons["wrong-name"][1] or "")
    assert reasons["ghost"][1] == "scheduled job has no record or no name"
    garbage = [j for jid, j in dead.items() if jid.startswith("bad-") and jid != "bad-json"]
    assert len(garbage) == 4  # three entries that are no ids, and the key that is no hash
    assert {j.error for j in garbage} == {"queue entry is not a job id", "job record is not a hash"}
    assert any(j.raw == "x" * 1024 for j in garbage)
    assert r.get(p + "job:a-string") == b"surprise"  # other data is not destroyed
    # a name no pool handles just waits; a job of a handled queue with another name is dead
    (nobody,) = await client.admin.queues(["nobody"])
    assert nobody.size == 1


async def _dead_at_least(client: Client, n: int) -> bool:
    return (await client.admin.page("dead")).total >= n


async def test_runner_marks_a_job_without_handler_unknown_job(
    client: Client, redis_url: str, namespace: str
) -> None:
    """The fetch script only leases names the pool serves, so unknown_job guards the rest."""
    from rota.worker.runner import run_job
    from rota.worker.runtime import Fetched, PoolRuntime

    rt = PoolRuntime(
        settings=pool_settings(redis_url, namespace),
        client=client,
        shard=client.admin.shards[0],
        handlers={},
    )
    job = Fetched("j1", "ghost", "1", 1, 0, 0, b"{}", 0, None, None)
    outcome = await run_job(rt, job)
    assert outcome == Dead(
        "j1", "ghost", "1", Reason.UNKNOWN_JOB, "no handler for job name 'ghost'"
    )
    assert outcome.kind == "dead"


async def test_odd_numbers_in_a_job_hash_do_not_stop_it_or_the_pool(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """A timeout of "nan" (a cancel scope refuses a NaN deadline) reads as none; a token
    Lua prints otherwise than Redis stores it does not make the finish stale; failures
    Python and Lua read differently still add up to max_fails."""
    p = "{" + namespace + "}:"
    odd: dict[str, Fields] = {
        "nan-timeout": {"timeout": "nan"},
        "inf-timeout": {"timeout": "inf"},
        "big-token": {"token": "99999999999999"},
        "huge-token": {"token": "1e400"},
        "nan-token": {"token": "nan"},
    }
    for jid, fields in odd.items():
        redis_sync.hset(p + "job:" + jid, mapping={"name": "work", "args": "{}", **fields})
        redis_sync.lpush(p + "queue:work", jid)
    failing: Fields = {
        "name": "fail",
        "args": "{}",
        "failures": "2.1617278211370186e+17",
        "max_fails": 2,
    }
    redis_sync.hset(p + "job:odd-failures", mapping=failing)
    redis_sync.lpush(p + "queue:fail", "odd-failures")
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def work(ctx: JobContext) -> None:
        ran.append(ctx.id)

    @pool.job(backoff=lambda n: 0)
    async def fail(ctx: JobContext) -> None:
        raise ValueError("no")

    async with pool.running():
        await wait_until(lambda: len(ran) == len(odd))
        later = await client.enqueue("work")
        await wait_until(lambda: len(ran) == len(odd) + 1)
        for jid in odd:
            await wait_until(partial(_state_is, client, jid, "complete"))
        await wait_until(lambda: _state_is(client, "odd-failures", "dead"))
    assert ran[-1] == later.id
    record = await client.job("odd-failures")
    assert record is not None
    assert (record.reason, record.attempts, record.failures) == ("error", 2, 2)
    assert "stale" not in await client.admin.stats()


async def _state_is(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


@pytest.mark.one_shard("calls one shard's scripts")
async def test_a_finish_with_an_unknown_outcome_makes_the_job_dead(client: Client) -> None:
    """Another language's pool sends an outcome rota does not know: the job ends dead
    with a reason instead of staying 'running' outside every set."""
    from rota.protocol.scripts import script

    job = await client.enqueue("work", n=1)
    fetch_args: list[str | int] = [0, 30_000, "pool-x", 1024, 1, "work", 0]
    flat, *_ = await script("fetch")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        fetch_args,
        client.admin.shards[0].script_mode,
    )
    token = flat[2].decode()
    args = finish_args(1, [job.id, "work", token, "finished-ish", "", "", ""])
    stale = await script("finish")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        args,
        client.admin.shards[0].script_mode,
    )
    assert stale == []
    record = await client.job(job.id)
    assert record is not None
    assert (record.state, record.reason) == ("dead", "error")
    assert record.error == "finish: unknown outcome finished-ish"
    assert (
        await client.admin.shards[0].redis.zscore(client.admin.shards[0].keys.dead, job.id)
        is not None
    )
    assert (
        await client.admin.shards[0].redis.zcard(client.admin.shards[0].keys.running("work")) == 0
    )


@pytest.mark.one_shard("writes one shard's keys and runs the CLI")
@pytest.mark.parametrize("due", [1.7e15, 1e300, float("inf")], ids=["ms-as-s", "1e300", "inf"])
async def test_a_retry_due_past_9999_stops_neither_a_pool_nor_the_cli(
    due: float,
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``Retry(delay=time.time() * 1000)`` as an older build wrote it: the pool's promote
    died on the reply ``1.7e+15``, and the CLI on ``year 58934 is out of range``."""
    p = "{" + namespace + "}:"
    fields: Fields = {"name": "ping", "args": "{}", "state": "retry", "run_at": repr(due)}
    redis_sync.hset(p + "job:far", mapping=fields)
    redis_sync.zadd(p + "retry", {"far": due})
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    assert await anyio.to_thread.run_sync(main, ["retry", "list", *conn]) == 0
    assert "far\tping" in capsys.readouterr().out
    assert await anyio.to_thread.run_sync(main, ["job", "show", "far", *conn]) == 0
    shown = capsys.readouterr().out
    assert "state  retry" in shown
    assert f"malformed  run_at='{due!r}'" in shown

    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job
    async def ping(ctx: JobContext) -> None:
        ran.append(ctx.id)

    async with pool.running():
        job = await client.enqueue("ping")
        await wait_until(lambda: ran == [job.id])
        await wait_until(lambda: _state_is(client, "far", "dead"))
    record = await client.job("far")
    assert record is not None and record.reason == "bad_payload"
    assert "is past the year 9999" in (record.error or "")
    assert await anyio.to_thread.run_sync(main, ["dead", "list", *conn]) == 0


@pytest.mark.one_shard("calls one shard's script")
async def test_promote_answers_a_due_time_of_15_digits_as_an_integer(client: Client) -> None:
    """Lua's tostring prints 253402300799000 (the last second of 9999, in ms) as
    2.53402300799e+14: the next due time goes as an integer whatever its size."""
    last = 253_402_300_799_000
    await client.admin.shards[0].redis.zadd(client.admin.shards[0].keys.scheduled, {"late": last})
    await client.admin.shards[0].redis.hset(
        client.admin.shards[0].keys.job("late"), mapping={"name": "work", "args": "{}"}
    )
    reply = await calls.promote(client.admin.shards[0].scope, now_ms(), 10)
    assert reply == (0, last, [])
