"""Every key kind of a namespace, each holding every kind of bad value (NaN, infinity,
1e300, a time in µs, text, nothing, a key of another type), written with plain Redis
commands as another language, an older build or an operator with redis-cli would: a
pool still runs the next good job, every CLI command answers (exit 0, or one line and
exit 1), every page and API answer without a server error."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import anyio
import httpx
import pytest
import redis
from redis.typing import EncodableT, FieldT
from structlog.testing import capture_logs

from rota import Client, JobContext, WorkerPool
from rota.cli import main
from rota.protocol import calls
from rota.protocol.job import now_ms
from rota.web import create_app
from tests.helpers import pool_settings, wait_until

pytestmark = [pytest.mark.timeout(120), pytest.mark.one_shard("plants keys of one shard")]

#: What a hash field or a string may hold that no reader expects.
TEXTS = ("nan", "inf", "-inf", "1e300", "1.7e15", "253402300800000", "9" * 30, "abc", "")
#: What a sorted set's score may be (Redis refuses NaN).
SCORES = (float("inf"), float("-inf"), 1e300, 1.7e15, 253402300800000, -1e300)
#: The numeric fields of a job hash (docs/protocol.md, "The job hash").
JOB_FIELDS = (
    "enqueued_at", "attempts", "failures", "lost", "token", "run_at", "max_fails",
    "timeout", "max_lost", "started_at", "finished_at", "pending", "abort", "expires",
)  # fmt: skip
SETS = ("scheduled", "retry", "dead", "complete", "waiting", "running:work", "pools")

Plant = Callable[[redis.Redis, str], None]


Fields = dict[FieldT, EncodableT]  # a hash as redis-py takes it


def _record(r: redis.Redis, p: str, job_id: str, **fields: str) -> None:
    record: Fields = {"name": "work", "args": "[]"}
    record.update(fields)
    r.hset(f"{p}job:{job_id}", mapping=record)


def _fields_in(where: str) -> Plant:
    """A job record per bad value, every numeric field holding it, in ``where``."""

    def plant(r: redis.Redis, p: str) -> None:
        for i, text in enumerate(TEXTS):
            job_id = f"fz{i}"
            _record(r, p, job_id, state=where, **dict.fromkeys(JOB_FIELDS, text))
            if where == "queued":
                r.lpush(p + "queue:work", job_id)
            else:
                r.zadd(p + where, {job_id: 1})

    return plant


def _scores(key: str) -> Plant:
    def plant(r: redis.Redis, p: str) -> None:
        for i, score in enumerate(SCORES):
            _record(r, p, f"fz{i}", state="running" if ":" in key else key)
            r.zadd(p + key, {f"fz{i}": score})
            if key.startswith("running:"):  # an abort asked for, kept for how long?
                r.hset(f"{p}job:fz{i}", "abort", TEXTS[i])
        if key.startswith("running:"):
            r.sadd(p + "leased", "work")

    return plant


def _hash_values(key: str, field: str) -> Plant:
    def plant(r: redis.Redis, p: str) -> None:
        for i, text in enumerate(TEXTS):
            r.hset(p + key, f"{field}{i}" if field != "work" else field, text)
            if field == "work":  # one field: the last value stays, try each in turn
                break

    return plant


def _stats(r: redis.Redis, p: str) -> None:
    for key in ("stats", "stats:20261127", "stats:202611271200"):
        r.hset(p + key, mapping={f"x{i}": t for i, t in enumerate(TEXTS)})
        r.hset(p + key, mapping={"processed": "1e300", "failed": "abc", "dead": "nan"})
        r.hset(p + key, mapping={"processed:work": "inf", "failed:work": "9" * 30})


def _group(r: redis.Redis, p: str) -> None:
    for i, text in enumerate(TEXTS):
        fields: Fields = dict.fromkeys(("total", "sent", "done", "failed", "created_at"), text)
        r.hset(f"{p}group:g{i}", mapping=fields)
        _record(r, p, f"fz{i}", group=f"g{i}", pending=text)  # a member: it runs
        r.lpush(p + "queue:work", f"fz{i}")


def _wrong_types(r: redis.Redis, p: str) -> None:
    r.set(p + "job:fz0", "a string")
    r.zadd(p + "retry", {"fz0": 1})
    r.rpush(p + "job:fz1", "a", "list")
    r.zadd(p + "dead", {"fz1": 1})
    r.sadd(p + "job:fz2", "a set")
    r.zadd(p + "scheduled", {"fz2": 2**40})
    r.set(p + "pool:vm:1:00000000", "{not json")
    r.zadd(p + "pools", {"vm:1:00000000": 1})
    r.set(p + "group:g", "x")
    _record(r, p, "fz3", group="g", state="dead")
    r.zadd(p + "dead", {"fz3": 1})


def _rate_tat(tat: str) -> Plant:
    def plant(r: redis.Redis, p: str) -> None:
        r.hset(p + "ratetat", "work", tat)  # the pool's handler has a rate

    return plant


CASES: dict[str, Plant] = {
    **{f"job fields, {w}": _fields_in(w) for w in ("queued", "retry", "scheduled", "dead")},
    **{f"scores of {key}": _scores(key) for key in SETS},
    "limits": _hash_values("limits", "work"),
    "priorities": _hash_values("priorities", "work"),
    **{f"rate's next start {t}": _rate_tat(t) for t in ("inf", "1e300", "nan", "abc")},
    "idle": _hash_values("idle", "work"),
    "cron off": _hash_values("cronoff", "work"),
    "stats": _stats,
    "group hash": _group,
    "keys of another type": _wrong_types,
}


async def _complete(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == "complete"


@pytest.mark.parametrize("plant", CASES.values(), ids=CASES.keys())
async def test_no_record_stops_a_pool_the_cli_or_the_web(
    plant: Plant,
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plant(redis_sync, "{" + namespace + "}:")
    # what a pool runs every few seconds, at once: a script that fails half-way fails
    await calls.reap(client.admin.shards[0].scope, 3, 60_000, 100)
    await calls.trim_dead(client.admin.shards[0].scope, now_ms(), 60_000, 10_000, 100)
    settings = pool_settings(redis_url, namespace, keep_result=60)
    pool = WorkerPool(settings=settings)

    @pool.job(rate="1000/s")
    async def work(ctx: JobContext) -> str:
        return ctx.id

    with capture_logs() as logs:
        async with pool.running():
            good = await client.enqueue("work")
            await wait_until(partial(_complete, client, good.id))
            later = await client.enqueue_in(0.05, "work")
            await wait_until(partial(_complete, client, later.id))
    # a script that fails half-way keeps its first writes: the pool says so, and reruns
    assert not [e for e in logs if e["log_level"] == "error"]

    # What a reader meets before a pool does: queued entries of records no pool read yet.
    p = "{" + namespace + "}:"
    redis_sync.set(p + "job:not-a-hash", "a string")
    _record(redis_sync, p, "far", enqueued_at="1e300")
    redis_sync.lpush(p + "queue:work", "far", "not-a-hash")  # the oldest last
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    commands = [
        ("status",),
        ("status", "--json"),
        *((which, "list") for which in ("dead", "retry", "scheduled", "waiting")),
        ("dead", "list", "--json"),
        ("retry", "list", "--json"),
        *(("job", "show", f"fz{i}") for i in range(len(TEXTS))),
        ("job", "show", "fz0", "--json"),
        *(("group", "show", f"g{i}") for i in range(len(TEXTS))),
        ("group", "show", "g"),
    ]
    for command in commands:
        code = await anyio.to_thread.run_sync(main, [*command, *conn])
        out, err = capsys.readouterr()
        assert code in (0, 1), (command, out, err)
        assert code == 0 or len(err.strip().splitlines()) == 1, (command, err)

    app = create_app(settings, client=client)
    pages = ["/", "/queues", "/queues/work", "/pools", "/cron", "/busy", "/redis"]
    pages += ["/scheduled", "/retry", "/dead", "/waiting", "/groups/g", "/flows/fz0"]
    for i in range(len(TEXTS)):
        pages += [f"/jobs/fz{i}", f"/api/jobs/fz{i}", f"/groups/g{i}", f"/api/groups/g{i}"]
    api = ["/api/dashboard", "/api/queues", "/api/queues/work/jobs", "/api/queues/work/stats"]
    api += ["/api/pools", "/api/cron", "/api/busy"]
    api += ["/api/scheduled", "/api/retry", "/api/dead", "/api/waiting", "/api/flows/fz0"]
    api += ["/metrics", "/healthz"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for path in pages + api:
            answer = await http.get(path, headers={"accept": "text/html"})
            assert answer.status_code < 500, (path, answer.text[-2000:])


async def test_a_field_that_names_no_time_or_number_is_shown_as_malformed(
    client: Client,
    redis_url: str,
    namespace: str,
    redis_sync: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fields = {"run_at": "abc", "finished_at": "1e300", "attempts": "nan", "started_at": ""}
    fields["enqueued_at"] = "1700000000000000"  # a time in µs
    _record(redis_sync, "{" + namespace + "}:", "odd", state="dead", **fields)
    record = await client.job("odd")
    assert record is not None
    assert record.malformed == (
        "attempts='nan'",
        "enqueued_at='1700000000000000'",
        "run_at='abc'",
        "finished_at='1e300'",
    )
    assert (record.run_at, record.attempts, record.finished_at) == (None, 0, None)
    assert record.enqueued_at == 1.7e12
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    assert await anyio.to_thread.run_sync(main, ["job", "show", "odd", *conn]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert f"   malformed  {' '.join(record.malformed)}" in shown
    assert " enqueued_at  malformed: 1.7e+15 ms" in shown
    app = create_app(pool_settings(redis_url, namespace), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        body = (await http.get("/api/jobs/odd")).json()
        page = (await http.get("/jobs/odd", headers={"accept": "text/html"})).text
    assert body["malformed"] == list(record.malformed)
    assert body["enqueued_at"] == 253_402_300_800_000  # one second past 9999: no time
    assert "run_at=&#39;abc&#39;" in page and "malformed: 2.53402e+14 ms" in page
