"""An operator's actions on one job (to the front of its queue, delete it from its queue,
kill it from the retry set) and the clean of a set by age, on a real Redis: each acts on
the job where it is at that moment, so a job a pool takes between the operator's look
and the action is left to run, never lost nor run twice. Runs over four shards too
(``ROTA_TEST_SHARDS=4``): every action finds the job's shard."""

from __future__ import annotations

import math

import anyio
import pytest

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.client.admin_jobs import CLEAN_CHUNK
from rota.client.shard import Shard
from rota.protocol import calls
from rota.protocol.job import now_ms
from tests.helpers import pool_settings, wait_until

pytestmark = pytest.mark.timeout(120)
DAY_MS = 86_400_000


async def lease(client: Client, job_id: str, name: str, n: int = 1) -> list[str]:
    """Lease up to ``n`` jobs of ``name`` on the shard that holds ``job_id``, as a pool's
    fetch does: their ids, in the order fetched."""
    shard = await client.admin.shard_holding(job_id)
    reply = await calls.fetch(shard.scope, calls.Lessee(30000, "pool-1", 1 << 20), [name] * n, [])
    return [job.id for job in reply.jobs]


async def state_of(client: Client, job_id: str) -> str | None:
    record = await client.job(job_id)
    return None if record is None else record.state


async def test_to_front_makes_a_queued_job_the_next_its_shard_gives(client: Client) -> None:
    jobs = [await client.enqueue("work", n=i) for i in range(6)]
    last = jobs[-1].id
    assert await client.admin.jobs.to_front(last)
    assert await lease(client, last, "work") == [last]
    assert await state_of(client, last) == "running"
    # the others keep their order (FIFO): the oldest of the shard next
    shard = await client.admin.shard_holding(last)
    same = [j.id for j in jobs[:-1] if (await client.admin.shard_holding(j.id)) is shard]
    if same:
        assert await lease(client, last, "work") == [same[0]]


async def test_to_front_of_a_keyed_job_gives_its_key_the_next_turn(client: Client) -> None:
    for i in range(3):
        await client.enqueue("hook", n=i)  # plain jobs first in line
        await client.enqueue_many([JobSpec(name="hook", kwargs={"n": i}, fair_key="a")])
    specs = [JobSpec(name="hook", kwargs={"n": i}, fair_key="b") for i in range(3)]
    late = (await client.enqueue_many(specs))[-1].id
    assert await client.admin.jobs.to_front(late)
    assert await lease(client, late, "hook") == [late]
    rows = {r.key: r.queued for r in await client.admin.fair.of("hook")}
    assert rows == {"a": 3, "b": 2}  # the counts follow


async def test_to_front_of_a_plain_job_goes_before_every_key(client: Client) -> None:
    keyed = await client.enqueue_many(
        [JobSpec(name="hook", kwargs={"n": i}, fair_key="a") for i in range(4)]
    )
    shard = await client.admin.shard_holding(keyed[0].id)
    # two plain jobs on the key's shard (a job without a key goes where its id says)
    plain: list[str] = []
    while len(plain) < 2:
        job = await client.enqueue("hook")
        if await client.admin.shard_holding(job.id) is shard:
            plain.append(job.id)
    # the plain list's turn comes first, then the key's: after one plain job, key a's
    assert await lease(client, plain[0], "hook") == [plain[0]]
    assert await client.admin.jobs.to_front(plain[1])
    assert await lease(client, plain[1], "hook") == [plain[1]]
    assert await lease(client, plain[1], "hook") == [keyed[0].id]


async def test_a_keyed_job_its_key_s_garbage_list_sent_to_the_plain_queue(
    client: Client,
) -> None:
    (probe,) = await client.enqueue_many([JobSpec(name="hook", fair_key="g")])
    shard = await client.admin.shard_holding(probe.id)
    assert await client.admin.jobs.delete_queued(probe.id)
    await shard.redis.set(shard.keys.fair_queue("hook", "g"), "not a list")  # by hand
    first = await client.enqueue_many([JobSpec(name="hook", fair_key="g", kwargs={"n": 1})])
    late = await client.enqueue_many([JobSpec(name="hook", fair_key="g", kwargs={"n": 2})])
    assert await client.admin.jobs.to_front(late[0].id)  # found in the plain queue
    assert await lease(client, late[0].id, "hook") == [late[0].id]
    assert await client.admin.jobs.delete_queued(first[0].id)
    assert await client.job(first[0].id) is None


async def test_delete_queued_removes_the_job_and_its_key_s_count(client: Client) -> None:
    plain = await client.enqueue("work")
    (keyed,) = await client.enqueue_many([JobSpec(name="hook", fair_key="t1")])
    assert await client.admin.jobs.delete_queued(plain.id)
    assert await client.admin.jobs.delete_queued(keyed.id)
    assert await client.job(plain.id) is None and await client.job(keyed.id) is None
    assert await client.admin.backlog(["work", "hook"]) == {"work": (0, 0), "hook": (0, 0)}
    assert await client.admin.fair.of("hook") == []
    assert not await client.admin.jobs.delete_queued(plain.id)  # gone: nothing to do
    assert not await client.admin.jobs.to_front("no-such-job")


async def test_a_job_a_pool_took_after_the_listing_is_left_to_run(client: Client) -> None:
    job = await client.enqueue("work")
    (keyed,) = await client.enqueue_many([JobSpec(name="hook", fair_key="t1")])
    listed = await client.admin.backlog(["work", "hook"])
    assert listed == {"work": (1, 0), "hook": (1, 0)}  # what the operator saw
    assert await lease(client, job.id, "work") == [job.id]  # a pool takes them meanwhile
    assert await lease(client, keyed.id, "hook") == [keyed.id]
    for j in (job.id, keyed.id):
        assert not await client.admin.jobs.to_front(j)
        assert not await client.admin.jobs.delete_queued(j)
        assert await state_of(client, j) == "running"
    running = {r.job_id for r in await client.admin.running(["work", "hook"])}
    assert running == {job.id, keyed.id}
    # and not queued a second time
    assert await client.admin.backlog(["work", "hook"]) == {"work": (0, 1), "hook": (0, 1)}


async def test_actions_racing_a_running_pool_lose_and_repeat_no_job(
    client: Client, redis_url: str, namespace: str
) -> None:
    """Every listed job is moved to the front or deleted while a pool takes them: each
    job ends run once or deleted, never both, never neither."""
    ran: list[str] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=2))

    @pool.job
    async def work(ctx: JobContext, n: int) -> None:
        ran.append(ctx.id)
        await anyio.sleep(0.005)  # a pool busy for as long as the operator acts

    ids = [
        j.id
        for j in await client.enqueue_many(
            [JobSpec(name="work", kwargs={"n": i}) for i in range(300)]
        )
    ]
    deleted: set[str] = set()
    async with pool.running():
        for i, job_id in enumerate(ids):  # the listing is the ids: the pool runs meanwhile
            if i % 2 and await client.admin.jobs.delete_queued(job_id):
                deleted.add(job_id)
            elif not i % 2:
                await client.admin.jobs.to_front(job_id)
        await wait_until(lambda: len(ran) + len(deleted) == len(ids))
    assert len(ran) == len(set(ran))  # none twice
    assert set(ran) | deleted == set(ids) and not set(ran) & deleted
    assert await client.admin.backlog(["work"]) == {"work": (0, 0)}


async def test_an_entry_left_in_a_queue_for_a_running_job_is_not_its_place(
    client: Client,
) -> None:
    job = await client.enqueue("work")
    assert await lease(client, job.id, "work") == [job.id]
    shard = await client.admin.shard_holding(job.id)
    await shard.redis.lpush(shard.keys.queue("work"), job.id)  # a second entry, by hand
    assert not await client.admin.jobs.delete_queued(job.id)
    assert not await client.admin.jobs.to_front(job.id)
    assert await state_of(client, job.id) == "running"  # its record is not deleted


async def _in_retry(client: Client, redis_url: str, namespace: str, n: int) -> list[str]:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace))

    @pool.job(max_fails=5, backoff=lambda n: 3600.0)
    async def flaky(ctx: JobContext, n: int) -> None:
        raise ConnectionError("refused")

    ids = [(await client.enqueue("flaky", n=i)).id for i in range(n)]
    async with pool.running():
        await wait_until(lambda: _sizes(client, retry=n))
    return ids


async def _sizes(client: Client, **sizes: int) -> bool:
    have = await client.admin.job_set_sizes()
    return all(have[k] == v for k, v in sizes.items())


async def test_kill_sends_a_retry_job_to_the_dead_set_with_reason_killed(
    client: Client, redis_url: str, namespace: str
) -> None:
    first, second, third = await _in_retry(client, redis_url, namespace, 3)
    assert await client.admin.jobs.kill([first]) == 1
    record = await client.job(first)
    assert record is not None
    assert (record.state, record.reason) == ("dead", "killed")
    assert record.error == "killed by an operator"
    assert record.attempts == 1  # no other try
    assert await _sizes(client, retry=2, dead=1)
    # a job the scheduler queued between the listing and the kill is left queued
    assert await client.admin.retry("retry", [second]) == 1
    assert await client.admin.jobs.kill([second, "no-such-job"]) == 0
    assert await state_of(client, second) == "queued"
    assert await client.admin.in_set("retry", [third]) == [third]
    assert await client.admin.jobs.kill([first]) == 0  # dead already: once only
    assert await _sizes(client, retry=1, dead=1)


async def _age(client: Client, job_id: str, key: str, ms: int) -> None:
    """Make a job look older: its score in a set (``dead``, ``complete``), or its
    ``enqueued_at`` (``job``), moved back ``ms``."""
    shard: Shard = await client.admin.shard_holding(job_id)
    if key == "job":
        await shard.redis.hset(shard.keys.job(job_id), "enqueued_at", now_ms() - ms)
    else:
        zset = shard.keys.dead if key == "dead" else shard.keys.complete
        await shard.redis.zadd(zset, {job_id: now_ms() - ms})


async def test_clean_deletes_the_dead_and_complete_jobs_older_than_an_age(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=3600.0))

    @pool.job(max_fails=1)
    async def doomed(ctx: JobContext) -> None:
        raise ValueError("no")

    @pool.job
    async def fine(ctx: JobContext) -> int:
        return 1

    @pool.job
    async def other(ctx: JobContext) -> int:
        return 2

    dead = [(await client.enqueue("doomed")).id for _ in range(3)]
    done = [(await client.enqueue("fine")).id for _ in range(3)]
    others = [(await client.enqueue("other")).id for _ in range(2)]
    async with pool.running():
        await wait_until(lambda: _sizes(client, dead=3))
        await wait_until(lambda: _kept(client, 5))
    await _age(client, dead[0], "dead", 2 * DAY_MS)
    for job_id in (done[0], others[0]):
        await _age(client, job_id, "complete", 2 * DAY_MS)
    assert await client.admin.jobs.clean("dead", 86400) == 1
    assert await client.job(dead[0]) is None and await state_of(client, dead[1]) == "dead"
    assert await client.admin.jobs.clean("complete", 86400, name="fine") == 1
    assert await client.job(done[0]) is None and await state_of(client, others[0]) == "complete"
    assert await client.admin.jobs.clean("complete", 86400) == 1
    assert await client.admin.jobs.clean("dead", 0) == 2
    assert await client.admin.jobs.clean("complete", 0, name="other") == 1
    assert await _kept(client, 2) and await _sizes(client, dead=0)


async def _kept(client: Client, n: int) -> bool:
    return (await client.admin.finished()).total == n


async def test_clean_of_the_scheduled_and_retry_sets_goes_by_the_enqueue(
    client: Client, redis_url: str, namespace: str
) -> None:
    retrying = await _in_retry(client, redis_url, namespace, 2)
    later = [(await client.enqueue_in(3600, "nap")).id for _ in range(3)]
    await _age(client, later[0], "job", 2 * DAY_MS)
    await _age(client, retrying[0], "job", 2 * DAY_MS)
    assert await client.admin.jobs.clean("scheduled", 86400) == 1
    assert await client.admin.jobs.clean("retry", 86400, name="nap") == 0
    assert await client.admin.jobs.clean("retry", 86400, name="flaky") == 1
    assert await client.job(later[0]) is None and await client.job(retrying[0]) is None
    assert await state_of(client, later[1]) == "scheduled"
    assert await _sizes(client, scheduled=2, retry=1)


async def test_clean_goes_through_a_set_larger_than_a_call_reads(client: Client) -> None:
    n = CLEAN_CHUNK + 100
    specs = [JobSpec(name="a" if i % 2 else "b", delay=3600) for i in range(2 * n)]
    await client.enqueue_many(specs)
    assert await client.admin.jobs.clean("scheduled", 0, name="a") == n
    assert await _sizes(client, scheduled=n)
    assert await client.admin.jobs.clean("scheduled", 0) == n


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("dead", math.nan), r"\Aolder_than: must be a finite number, got nan\Z"),
        (("dead", -1), r"\Aolder_than: must be from 0 to 315360000, got -1\Z"),
        (("retry", 1e300), r"\Aolder_than: must be from 0 to 315360000, got 1e\+300\Z"),
        (("dead", math.inf), r"\Aolder_than: must be a finite number, got inf\Z"),
        (("queued", 1), r"\Awhich: one of dead, retry, scheduled, complete, not 'queued'\Z"),
    ],
)
async def test_a_clean_refuses_a_bad_input_in_one_line(
    client: Client, args: tuple[str, float], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        await client.admin.jobs.clean(*args)  # type: ignore[arg-type]


async def test_a_bad_name_and_too_many_ids_are_refused(client: Client) -> None:
    with pytest.raises(ValueError, match="invalid job name"):
        await client.admin.jobs.clean("dead", 1, name="no spaces")
    with pytest.raises(ValueError, match=r"\Aids: at most 1000 at once, got 1001\Z"):
        await client.admin.jobs.kill([str(i) for i in range(1001)])
    with pytest.raises(ValueError, match=r"\Aerror: at most 1000 characters, got 1001\Z"):
        await client.admin.jobs.kill(["some-id"], error="x" * 1001)
