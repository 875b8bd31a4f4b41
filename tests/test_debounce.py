"""Debounce by key: many enqueues of a key become one pending job, which runs once with
the first or the newest args; a job already due or running is never changed; whatever
is written at a debounce key never stops an enqueue. Runs over one shard and four."""

from __future__ import annotations

import math
import time

import anyio
import httpx
import msgspec
import pytest
import redis

from rota import Client, Debounce, JobContext, JobSpec, WorkerPool
from rota.client.spec import to_row
from rota.protocol.job import JobSet
from rota.protocol.keys import Keys
from rota.protocol.shards import shard_of
from rota.web import create_app
from tests.cli_helpers import rota_env, run_rota
from tests.conftest import SHARDS
from tests.helpers import pool_settings, wait_until


def _key(namespace: str, key: str) -> str:
    """The Redis key of a debounce key, in the shard the key routes to."""
    return Keys(namespace, shard_of(key, SHARDS), SHARDS).debounce(key)


def _pool(redis_url: str, namespace: str) -> WorkerPool:
    """A pool that keeps its jobs' records (to read what ran) and promotes often."""
    settings = pool_settings(redis_url, namespace, scheduler_interval=0.05, keep_result=600)
    return WorkerPool(settings=settings)


@pytest.mark.parametrize("mode", ["extend", "replace"])
async def test_a_thousand_enqueues_from_four_producers_run_once_after_the_last(
    client: Client, redis_url: str, namespace: str, mode: str
) -> None:
    returned = 0  # enqueues that returned so far
    at_start: list[int] = []  # how many had returned when the handler started
    ran: list[tuple[int, int]] = []
    last_call = 0.0  # when the last enqueue was sent (time.time())
    pool = _pool(redis_url, namespace)

    @pool.job
    async def reindex(ctx: JobContext, producer: int, i: int) -> None:
        at_start.append(returned)
        ran.append((producer, i))

    db = Debounce("index:7", 1.0, mode)  # type: ignore[arg-type]
    ids: set[str] = set()
    made = 0

    async def produce(producer: int) -> None:
        nonlocal returned, last_call, made
        for i in range(250):
            last_call = max(last_call, time.time())
            job = await client.enqueue("reindex", producer=producer, i=i, debounce=db)
            returned += 1
            ids.add(job.id)
            made += job.created
            await anyio.sleep(0.007)  # 250 enqueues over about 2 s per producer

    async with pool.running():
        async with anyio.create_task_group() as tg:
            for p in range(4):
                tg.start_soon(produce, p)
        (job_id,) = ids  # every enqueue named the one pending job
        assert made == 1
        await wait_until(lambda: _state(client, job_id, "complete"), within=15)
    record = await client.job(job_id)
    assert record is not None and record.state == "complete"
    # It ran once, after the last enqueue returned, not before the last enqueue + window.
    assert at_start == [1000]
    assert record.absorbed == 999 and record.debounce_key == "index:7"
    assert record.run_at is not None  # the record keeps ms; the producers' clock, floored
    assert round(record.run_at * 1000) >= math.floor(last_call * 1000) + 1000
    assert record.started_at is not None and record.started_at >= record.run_at
    producer, i = ran[0]
    if mode == "replace":
        assert i == 249  # the last args of a producer: the last enqueue's
    else:
        assert record.args_value == {"producer": producer, "i": i}
        assert i == 0  # extend keeps the args of the enqueue that made the job


async def _state(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_replace_takes_the_last_args_and_first_keeps_the_first(client: Client) -> None:
    for n in range(5):
        replaced = await client.enqueue("r", n, debounce=Debounce("k", 60, "replace"))
        kept = await client.enqueue("f", n, debounce=Debounce("k2", 60, "first"))
        extended = await client.enqueue("e", n, debounce=Debounce("k3", 60, "extend"))
        still = await client.enqueue("s", n, debounce=Debounce("k4", 60, "replace", move=False))
        assert (replaced.created, kept.created) == (n == 0, n == 0)
    times = {}
    for job, args in ((replaced, [4]), (kept, [0]), (extended, [0]), (still, [4])):
        record = await client.job(job.id)
        assert record is not None and record.state == "scheduled"
        assert record.absorbed == 4 and record.args_value == args
        times[job.name] = (record.enqueued_at, record.run_at)
    # first and a replace that keeps its time: due a window after the first enqueue
    for name in ("f", "s"):
        enqueued, run_at = times[name]
        assert enqueued is not None and run_at is not None and run_at - enqueued == 60


async def test_a_running_job_is_never_replaced_the_next_enqueue_is_a_new_job(
    client: Client, redis_url: str, namespace: str
) -> None:
    started, release = anyio.Event(), anyio.Event()
    seen: list[int] = []
    pool = _pool(redis_url, namespace)

    @pool.job
    async def rebuild(ctx: JobContext, n: int) -> None:
        seen.append(n)
        if n == 1:
            started.set()
            await release.wait()

    db = Debounce("cache", 0.05, "replace")
    later = Debounce("cache", 60, "replace")  # the new pending job waits for the test
    first = await client.enqueue("rebuild", 1, debounce=db)
    async with pool.running():
        await started.wait()
        second = await client.enqueue("rebuild", 2, debounce=later)
        assert second.created and second.id != first.id
        # The key now names the new pending job: the next enqueue is its, not the
        # running job's.
        third = await client.enqueue("rebuild", 3, debounce=later)
        assert third.id == second.id and not third.created
        running = await client.job(first.id)
        assert running is not None and running.state == "running"
        assert running.args_value == [1] and running.absorbed == 0
        pending = await client.job(second.id)
        assert pending is not None and (pending.absorbed, pending.args_value) == (1, [3])
        release.set()
        assert await client.admin.retry("scheduled", [second.id]) == 1  # due now
        await wait_until(lambda: sorted(seen) == [1, 3])
    assert seen == [1, 3]


@pytest.mark.parametrize("where", ["scheduled"])
async def test_deleting_the_pending_job_frees_the_key(client: Client, where: JobSet) -> None:
    db = Debounce("gone", 60, "extend")
    first = await client.enqueue("d", 1, debounce=db)
    assert await client.admin.delete(where, [first.id]) == 1
    again = await client.enqueue("d", 2, debounce=db)
    assert again.created and again.id != first.id
    record = await client.job(again.id)
    assert record is not None and record.state == "scheduled" and record.absorbed == 0


@pytest.mark.parametrize(
    "garbage",
    [
        "hash",
        "list",
        "missing id",
        "bad id",
        "a queued job",
        "another name",
        "no set entry",
        "a job key of another type",
    ],
)
async def test_garbage_at_a_debounce_key_never_stops_an_enqueue(
    client: Client, redis_sync: redis.Redis, namespace: str, garbage: str
) -> None:
    dk = _key(namespace, "g")
    other = await client.enqueue("other", 0)
    pending = await client.enqueue("g", 0, debounce=Debounce("g2", 60))
    jk = Keys(namespace, shard_of("g2", SHARDS), SHARDS).job(pending.id)
    redis_sync.delete(dk)
    if garbage == "hash":
        redis_sync.hset(dk, "x", "1")
    elif garbage == "list":
        redis_sync.rpush(dk, "x")
    elif garbage == "missing id":
        redis_sync.set(dk, "no-such-job")
    elif garbage == "bad id":
        redis_sync.set(dk, "{not an id}\x00")
    elif garbage == "a queued job":
        redis_sync.set(dk, other.id)
    elif garbage == "another name":  # a pending job of another key and name
        redis_sync.set(dk, pending.id)
    elif garbage == "a job key of another type":
        redis_sync.set(dk, "strjob")
        redis_sync.set(Keys(namespace, shard_of("g", SHARDS), SHARDS).job("strjob"), "x")
    else:  # a job that says scheduled but is in no scheduled set
        redis_sync.set(dk, pending.id)
        redis_sync.hset(jk, "debounce_key", "g")
        redis_sync.hset(jk, "name", "g")
        scheduled = Keys(namespace, shard_of("g2", SHARDS), SHARDS).scheduled
        redis_sync.zrem(scheduled, pending.id)
    made = await client.enqueue("g", 1, debounce=Debounce("g", 60, "replace"))
    assert made.created and made.id not in (other.id, pending.id)
    assert redis_sync.get(dk) == made.id.encode()
    again = await client.enqueue("g", 2, debounce=Debounce("g", 60, "replace"))
    assert again.id == made.id and not again.created
    record = await client.job(made.id)
    assert record is not None and record.absorbed == 1 and record.args_value == [2]


async def test_a_producer_whose_clock_is_behind_moves_no_run_time_back(client: Client) -> None:
    db = Debounce("clock", 60, "replace")
    first = await client.enqueue("c", 1, debounce=db)
    record = await client.job(first.id)
    assert record is not None and record.run_at is not None
    row = to_row(JobSpec(name="c", args=(2,), debounce=db), 1 << 20, 86400)
    behind = row._replace(now=row.now - 30_000)  # its clock 30 s behind
    (taken,) = await client.admin.shards[shard_of("clock", SHARDS)].send([behind])
    assert taken.id == first.id and not taken.created
    after = await client.job(first.id)
    assert after is not None and after.run_at == record.run_at and after.args_value == [2]


async def test_enqueue_many_debounces_within_one_call(client: Client) -> None:
    db = Debounce("batch", 60, "replace")
    specs = [JobSpec(name="b", args=(n,), debounce=db) for n in range(3)]
    specs.append(JobSpec(name="b", args=(9,)))
    jobs = await client.enqueue_many(specs)
    assert [j.created for j in jobs] == [True, False, False, True]
    assert jobs[0].id == jobs[1].id == jobs[2].id
    record = await client.job(jobs[0].id)
    assert record is not None and record.absorbed == 2 and record.args_value == [2]
    # and in a later call, the pending job takes it in too
    (later, plain) = await client.enqueue_many([JobSpec(name="b", args=(5,), debounce=db)] * 2)
    assert later.id == plain.id == jobs[0].id


@pytest.mark.parametrize(
    ("debounce", "also", "match"),
    [
        (Debounce("k", 0), {}, r"debounce_window: must be from 0\.001 to 2592000"),
        (Debounce("k", 31 * 86400), {}, "debounce_window: must be from"),
        (Debounce("k", float("nan")), {}, "debounce_window: must be a finite number"),
        (Debounce("", 1), {}, "debounce_key: 1 to 1024 characters"),
        (
            Debounce("k", 1, "last"),  # type: ignore[arg-type]
            {},
            "debounce_mode: must be 'first', 'extend' or 'replace'",
        ),
        (Debounce("k", 1), {"unique": "u"}, "debounce: .*give it no unique key"),
        (Debounce("k", 1), {"delay": 5.0}, r"debounce: .*give it no run time"),
        (Debounce("k", 1), {"after": ("x",)}, "debounce: a debounced job cannot wait"),
    ],
)
async def test_debounce_options_are_checked(
    client: Client, debounce: Debounce, also: dict[str, object], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        await client.enqueue_many([JobSpec(name="n", debounce=debounce, **also)])  # type: ignore[arg-type]


async def test_a_chain_refuses_a_debounced_step_and_writes_nothing(client: Client) -> None:
    # A taken-in first step returns the pending job's id: the next step would wait for
    # a job that was never created.
    steps = [JobSpec(name="c", debounce=Debounce("chained", 60)), JobSpec(name="d")]
    with pytest.raises(ValueError, match="chain: debounced jobs are not supported"):
        await client.chain(steps)
    sizes = await client.admin.job_set_sizes()
    assert sizes["scheduled"] == sizes["waiting"] == 0, sizes


async def test_the_cli_debounces(client: Client, redis_url: str, namespace: str) -> None:
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    env = rota_env(ROTA_SHARDS=str(SHARDS))
    key = ("--debounce-key", "cli", "--debounce-window", "10m")
    first = run_rota("enqueue", "nap", "n=1", *key, "--json", *conn, env=env)
    assert first.returncode == 0, first.stderr
    made = msgspec.json.decode(first.stdout)
    assert made["created"] is True
    again = run_rota("enqueue", "nap", "n=2", *key, "--debounce-mode", "replace", *conn, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(made["id"]) and "debounced" in again.stdout
    record = await client.job(made["id"])
    assert record is not None and record.state == "scheduled"
    assert (record.args_value, record.absorbed, record.debounce_key) == ({"n": 2}, 1, "cli")
    assert record.run_at is not None and record.enqueued_at is not None
    assert record.run_at - record.enqueued_at >= 600
    bad = run_rota("enqueue", "nap", *key[:2], "--debounce-window", "0", *conn, env=env)
    assert bad.returncode == 2 and "debounce_window: must be from 0.001" in bad.stderr


async def test_the_http_api_debounces_and_the_job_page_shows_it(
    client: Client, redis_url: str, namespace: str
) -> None:
    app = create_app(pool_settings(redis_url, namespace), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http:
        body = {"name": "mail", "kwargs": {"n": 1}, "debounce_key": "web", "debounce_window": 60}
        first = await http.post("/api/jobs", json=body)
        assert first.status_code == 201, first.text
        job_id = first.json()["id"]
        body |= {"kwargs": {"n": 2}, "debounce_mode": "replace", "debounce_move": False}
        second = await http.post("/api/jobs", json=body)
        assert second.status_code == 200 and second.json()["id"] == job_id
        job = (await http.get(f"/api/jobs/{job_id}")).json()
        assert (job["debounce_key"], job["absorbed"], job["args"]) == ("web", 1, {"n": 2})
        page = await http.get(f"/jobs/{job_id}", headers={"accept": "text/html"})
        assert page.status_code == 200
        assert 'id="job-debounce-key">web<' in page.text
        assert "1 enqueue of its key" in page.text
        alone = await http.post("/api/jobs", json={"name": "mail", "debounce_key": "web"})
        assert alone.status_code == 422 and "debounce_window" in alone.json()["error"]
        wide = await http.post("/api/jobs", json={**body, "debounce_window": 1e9})
        assert wide.status_code == 422 and "debounce_window" in wide.json()["error"]
