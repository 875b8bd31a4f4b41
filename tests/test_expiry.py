"""A job's expiry (``expires_in``, ``expires_at``, a handler's default): a job not
started by then never starts, and ends dead with reason ``expired``, whether it waits in
its queue behind others, in the pool's handoff, or in the scheduled or retry set."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import httpx
import pytest
import redis

from rota import Client, JobContext, JobSpec, Retry, State, WorkerPool
from rota.protocol.job import Reason
from rota.protocol.shards import new_id_in
from rota.web import create_app
from tests.cli_helpers import rota_json
from tests.helpers import pool_settings, rounds, wait_until

pytestmark = pytest.mark.timeout(90)


def _recording(
    redis_url: str, namespace: str, settings: dict[str, Any] | None = None, **options: Any
) -> tuple[WorkerPool, list[str]]:
    """A pool whose handler ``step`` (with ``options``) records the ids it starts, then
    sleeps ``hold`` seconds."""
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, **(settings or {})))

    async def step(ctx: JobContext, hold: float = 0) -> None:
        ran.append(ctx.id)
        await anyio.sleep(hold)

    pool.job(**options)(step)
    return pool, ran


async def test_jobs_behind_a_backlog_end_expired_in_time_and_never_start(
    client: Client, redis_url: str, namespace: str
) -> None:
    started: set[str] = set()
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, scheduler_interval=0.5))

    @pool.job
    async def work(ctx: JobContext, n: int, slow: bool) -> None:
        started.add(ctx.id)
        if slow:
            await anyio.sleep(0.5)

    # 60 jobs of 0.5 s on 10 workers: about 3 s of backlog ahead of the 1,000.
    backlog = await client.enqueue_many(
        JobSpec(name="work", kwargs={"n": i, "slow": True}) for i in range(60)
    )
    expiring = await client.enqueue_many(
        JobSpec(name="work", kwargs={"n": i, "slow": False}, expires_in=1) for i in range(1000)
    )
    ids = [e.id for e in expiring]
    async with pool.running():
        await wait_until(lambda: len(started) == 60, within=30)
        records = [await client.job(i) for i in ids]
    assert not started & set(ids)
    assert {e.id for e in backlog} == started
    for record in records:
        assert record is not None and record.state == State.DEAD
        assert record.reason == Reason.EXPIRED.value == "expired"
        assert record.expires is not None and record.finished_at is not None
        assert 0 <= record.finished_at - record.expires <= 1.0, record
    assert (await client.admin.job_set_sizes())["dead"] == 1000
    stats = await client.admin.stats()
    assert (stats["dead"], stats["failed"]) == (1000, 1000)


async def test_a_fetch_ends_an_expired_job_and_leases_the_next_one_in_its_place(
    client: Client, redis_url: str, namespace: str
) -> None:
    # One job per fetch: the expired one is ended (by the fetch unless the scheduler
    # came first) and the same call leases the next in its slot.
    pool, ran = _recording(redis_url, namespace, {"concurrency": 1, "fetch_batch": 1})

    # The three in one shard's queue: FIFO holds within a shard only.
    def first() -> str:
        return new_id_in(0, len(client.admin.shards))

    gone = await client.enqueue("step", expires_at=time.time() - 1, job_id=first())
    kept = [
        await client.enqueue("step", expires_in=60, job_id=first()),
        await client.enqueue("step", job_id=first()),
    ]
    async with pool.running():
        await wait_until(lambda: ran == [k.id for k in kept])
    record = await client.job(gone.id)
    assert record is not None and (record.state, record.reason) == (State.DEAD, "expired")
    assert "before it started" in (record.error or "")


async def test_the_handler_default_applies_when_the_enqueue_gives_none(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, ran = _recording(redis_url, namespace, expires_in=0.2)
    old = await client.enqueue("step")
    own = await client.enqueue("step", expires_in=60)  # its own wins over the default
    await anyio.sleep(0.4)
    async with pool.running():
        await wait_until(lambda: ran == [own.id])
        await rounds(pool)
    record = await client.job(old.id)
    assert record is not None and (record.state, record.reason) == (State.DEAD, "expired")
    assert ran == [own.id]


async def test_a_skip_dead_handler_drops_its_expired_jobs(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, ran = _recording(redis_url, namespace, skip_dead=True)
    gone = await client.enqueue("step", expires_at=datetime.now(UTC).replace(year=2020))
    async with pool.running():
        await rounds(pool, n=2)
    assert ran == [] and await client.job(gone.id) is None
    assert (await client.admin.job_set_sizes())["dead"] == 0
    assert (await client.admin.stats())["failed"] == 1


async def test_scheduled_and_retrying_jobs_end_expired_instead_of_running(
    client: Client, redis_url: str, namespace: str
) -> None:
    attempts: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, scheduler_interval=0.2))

    @pool.job
    async def later(ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        raise Retry(delay=30)

    late = await client.enqueue_in(30, "later", expires_in=0.5)
    async with pool.running():
        retried = await client.enqueue("later", expires_in=1)
        await wait_until(lambda: attempts == [1])
        await wait_until(lambda: _reason(client, retried.id), within=3)
        await wait_until(lambda: _reason(client, late.id), within=3)
    assert attempts == [1]
    for job_id in (late.id, retried.id):
        record = await client.job(job_id)
        assert record is not None and record.expires is not None
        assert record.finished_at is not None and record.finished_at - record.expires < 1
    assert (await client.admin.job_set_sizes()) | {"dead": 2} == {
        "scheduled": 0,
        "retry": 0,
        "dead": 2,
        "waiting": 0,
    }


async def _reason(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.reason == "expired"


async def test_an_expired_parent_fails_its_dependents(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, ran = _recording(redis_url, namespace)
    parent = await client.enqueue("step", expires_at=1.0)
    child = await client.enqueue("step", after=[parent.id])
    async with pool.running():
        await wait_until(lambda: _reason(client, parent.id))
        await rounds(pool)
    record = await client.job(child.id)
    assert record is not None and record.state == State.DEAD
    assert record.reason == "dependency_failed" and ran == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"expires_in": math.nan}, "expires_in: must be a finite number, got nan"),
        ({"expires_in": 1e300}, "expires_in: must be from 0.001 to 315360000, got 1e+300"),
        ({"expires_in": -1}, "expires_in: must be from 0.001 to 315360000, got -1"),
        ({"expires_in": 0}, "expires_in: must be from 0.001 to 315360000, got 0"),
        ({"expires_at": 1e300}, "expires_at: a time from 1970 to 9999"),
        ({"expires_at": -5.0}, "expires_at: a time from 1970 to 9999"),
        ({"expires_in": 5, "expires_at": 1e9}, "expires_in and expires_at: give one"),
    ],
)
async def test_expiry_out_of_range_is_one_line_and_enqueues_nothing(
    client: Client, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"\A[^\n]*\Z") as caught:
        await client.enqueue_many([JobSpec(name="step", **options)])
    assert str(caught.value).startswith(message)
    assert (await client.admin.queues(["step"]))[0].size == 0


def test_a_handler_default_out_of_range_is_refused() -> None:
    pool = WorkerPool()
    with pytest.raises(ValueError, match=r"job 'h': expires_in: must be from 0\.001"):
        pool.job(name="h", expires_in=0)(lambda: None)


@pytest.mark.one_shard("writes a record by hand")
@pytest.mark.parametrize("raw", ["abc", "nan", "inf", "-inf", "-5", "0", "1e300", ""])
async def test_a_malformed_expiry_is_no_expiry(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis, raw: str
) -> None:
    pool, ran = _recording(redis_url, namespace)
    job = await client.enqueue("step")
    redis_sync.hset("{" + namespace + "}:job:" + job.id, "expires", raw)
    record = await client.job(job.id)
    assert record is not None and record.expires is None
    async with pool.running():
        await wait_until(lambda: ran == [job.id])


async def test_the_cli_and_the_http_api_take_an_expiry(
    client: Client, redis_url: str, namespace: str
) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    by_cli = rota_json("enqueue", "nap", "--expires-in", "5m", *conn)
    at_cli = rota_json("enqueue", "nap", "--expires-at", "2030-01-01T00:00:00", *conn)
    app = create_app(pool_settings(redis_url, namespace), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http:
        by_http = await http.post("/api/jobs", json={"name": "nap", "expires_in": 60})
        at_http = await http.post(
            "/api/jobs", json={"name": "nap", "expires_at": "2030-01-01T00:00:00Z"}
        )
        both = await http.post("/api/jobs", json={"name": "nap", "expires_in": 1, "expires_at": 1})
    assert (by_http.status_code, at_http.status_code, both.status_code) == (201, 201, 422)
    assert both.json()["error"] == "expires_in and expires_at: give one of them, not both"
    now = time.time()
    expected = {
        by_cli["id"]: now + 300,
        by_http.json()["id"]: now + 60,
        at_cli["id"]: 1893456000.0,
        at_http.json()["id"]: 1893456000.0,
    }
    for job_id, at in expected.items():
        record = await client.job(job_id)
        assert record is not None and record.expires is not None
        assert abs(record.expires - at) < 30, (job_id, record.expires, at)


async def test_a_job_that_expires_while_it_waits_in_the_pool_ends_then_unstarted(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, ran = _recording(redis_url, namespace, {"concurrency": 1, "prefetch": 1})
    async with pool.running():
        warm = await client.enqueue("step", hold=0)  # short jobs: the pool leases ahead
        await wait_until(lambda: ran == [warm.id])
        await rounds(pool)
        # Both in one shard's queue, so that the held one waits behind the other (FIFO
        # holds within a shard only).
        first = len(client.admin.shards)
        _, held = await client.enqueue_many(
            [
                JobSpec(name="step", kwargs={"hold": 1.5}, job_id=new_id_in(0, first)),
                JobSpec(
                    name="step", kwargs={"hold": 0}, expires_in=0.5, job_id=new_id_in(0, first)
                ),
            ]
        )
        await wait_until(lambda: _reason(client, held.id), within=5)
    record = await client.job(held.id)
    assert record is not None and record.expires is not None and record.finished_at is not None
    assert record.attempts == 1  # leased in time, then ended by the pool, not the fetch
    assert record.finished_at - record.expires < 0.5 and held.id not in ran


def _expiring(client: Client, r: redis.Redis) -> list[bytes]:
    """The entries of every shard's expiring set."""
    return [
        e for s in client.admin.shards for e in cast(list[bytes], r.zrange(s.keys.expiring, 0, -1))
    ]


async def test_stale_and_hand_written_expiring_entries_end_nothing_and_leave(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    # Due entries of the expiring set whose job is gone, finished, no hash, or holds an
    # expiry that is no time or still ahead: the promote script drops each and ends no
    # job, and the pool serves the namespace as before.
    pool, ran = _recording(redis_url, namespace, keep_result=60)
    done = await client.enqueue("step")
    async with pool.running():
        await wait_until(lambda: ran == [done.id])
    odd = await client.enqueue("step")
    later = await client.enqueue("step", expires_in=60)
    past = time.time() * 1000 - 5000
    # Each job's entry in the shard that holds it; the others in shard 0.
    for job in (done, odd, later):
        keys = (await client.admin.shard_holding(job.id)).keys
        redis_sync.zadd(keys.expiring, {job.id: past})
        if job is odd:
            redis_sync.hset(keys.job(odd.id), "expires", "nan")
    keys = client.admin.shards[0].keys
    redis_sync.set(keys.job("string"), "x")
    redis_sync.zadd(keys.expiring, dict.fromkeys(["deleted", "string", ""], past))
    async with pool.running():
        await wait_until(lambda: sorted(ran) == sorted([done.id, odd.id, later.id]))
        await rounds(pool)
    assert _expiring(client, redis_sync) == []
    assert (await client.admin.job_set_sizes())["dead"] == 0
    record = await client.job(done.id)
    assert record is not None and record.state == State.COMPLETE


async def test_a_job_that_ends_or_is_deleted_leaves_the_expiring_set_at_once(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    # Entries of jobs that can no longer start would otherwise stay until their expiry
    # (an hour here, years at most): the set would grow with every job ever enqueued
    # with one. Each way a job ends takes its entry out; a job that may still start
    # (retrying) keeps it.
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))
    outcomes: dict[str, str] = {}

    @pool.job(max_fails=1)
    async def once(ctx: JobContext, how: str) -> None:
        outcomes[ctx.id] = how
        if how == "fail":
            raise ValueError("fails for good")

    @pool.job(max_fails=1, skip_dead=True)
    async def dropped(ctx: JobContext) -> None:
        outcomes[ctx.id] = "drop"
        raise ValueError("fails, kept nowhere")

    @pool.job(max_fails=3)
    async def again(ctx: JobContext) -> None:
        outcomes[ctx.id] = "again"
        raise Retry(delay=3600)

    ran = [
        await client.enqueue("once", how="complete", expires_in=3600),
        await client.enqueue("once", how="fail", expires_in=3600),
        await client.enqueue("dropped", expires_in=3600),
    ]
    retrying = await client.enqueue("again", expires_in=3600)
    aborted = await client.enqueue_in(600, "once", how="abort", expires_in=3600)
    deleted = await client.enqueue_in(600, "once", how="delete", expires_in=3600)
    assert len(_expiring(client, redis_sync)) == 6
    assert await client.abort(aborted.id) == "scheduled"
    assert await client.admin.delete("scheduled", [deleted.id]) == 1
    retry = (await client.admin.shard_holding(retrying.id)).keys.retry
    async with pool.running():
        await wait_until(lambda: len(outcomes) == 4)
        await wait_until(lambda: redis_sync.zscore(retry, retrying.id) is not None)
    assert _expiring(client, redis_sync) == [retrying.id.encode()]
    assert {r.id for r in ran} <= outcomes.keys()
