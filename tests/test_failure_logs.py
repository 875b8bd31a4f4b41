"""A failed attempt's traceback goes to the job's log with the attempt's finish: in the
same script call as the outcome (no call of its own per failing job), fenced by the
lease's token like the outcome, and read where it always was (``client.job_log``,
``rota job show``, the job page)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import msgspec
import pytest
import redis

from rota import Client, WorkerPool
from rota.protocol.scripts import script
from rota.web import create_app
from tests.cli_helpers import rota_json
from tests.helpers import finish_args, lease_tokens, pool_settings, wait_until

pytestmark = pytest.mark.timeout(120)


class ServiceDown(Exception):
    pass


def _call_service(n: int) -> None:
    raise ServiceDown(f"service refused request {n}")


async def test_a_failed_attempts_traceback_is_shown_where_it_was(
    client: Client, redis_url: str, namespace: str
) -> None:
    """A handler that takes no context: the pool makes none to keep its traceback."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))

    @pool.job(max_fails=2, backoff=lambda n: 0.01)
    async def sync_orders(n: int) -> None:
        _call_service(n)

    job = await client.enqueue("sync_orders", 7)
    async with pool.running(client=client):
        await wait_until(lambda: _state_is(client, job.id, "dead"), within=20)
    lines = await client.job_log(job.id)
    error = "tests.test_failure_logs.ServiceDown: service refused request 7"
    assert [line.split("\n", 2)[:2] for line in lines] == [
        ["attempt 1 failed:", "Traceback (most recent call last):"],
        ["attempt 2 failed:", "Traceback (most recent call last):"],
    ]
    for line in lines:
        assert line.endswith(error) and "in _call_service" in line
        assert 'raise ServiceDown(f"service refused request {n}")' in line
        assert "^^^" not in line  # no column markers: they cost a failing job the most

    shown = await anyio.to_thread.run_sync(
        lambda: rota_json("job", "show", job.id, "--redis-url", redis_url, "--namespace", namespace)
    )
    assert shown["logs"] == lines
    app = create_app(pool_settings(redis_url, namespace), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http:
        page = await http.get(f"/jobs/{job.id}")
    assert page.status_code == 200
    assert "attempt 2 failed:" in page.text and "service refused request 7" in page.text


async def _state_is(client: Client, job_id: str, state: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


# -- the finish script --------------------------------------------------------------


async def _finish(client: Client, rows: list[Any], logs: Any, *extra: Any) -> Any:
    args = [*finish_args(rows[0], rows[1:]), msgspec.msgpack.encode(logs), *extra]
    return await script("finish")(
        client.admin.shards[0].redis,
        client.admin.shards[0].keys.prefix,
        args,
        client.admin.shards[0].script_mode,
    )


async def _leased(client: Client, n: int = 1) -> dict[str, str]:
    for _ in range(n):
        await client.enqueue("work")
    return await lease_tokens(client, "work", n)


@pytest.mark.one_shard("calls one shard's scripts")
async def test_the_finish_writes_the_line_of_a_failed_attempt(
    client: Client, redis_sync: redis.Redis
) -> None:
    (job_id, token), *_ = (await _leased(client)).items()
    # 2000 characters (as the runner cuts a traceback), 5999 bytes: kept whole
    line = "…" + "é" * 1998 + "!"
    rows = [1, job_id, "work", token, "retry", 10**12, "boom", "error"]
    assert await _finish(client, rows, [job_id, line, "some-other-id", "not written"]) == []
    assert redis_sync.lrange(client.admin.shards[0].keys.joblog(job_id), 0, -1) == [line.encode()]
    assert redis_sync.hget(client.admin.shards[0].keys.job(job_id), "logged") == b"1"
    assert not redis_sync.exists(client.admin.shards[0].keys.joblog("some-other-id"))
    # the same outcome sent again (its reply lost) is recognised as recorded, not
    # stale, and its line is not written twice
    assert await _finish(client, rows, [job_id, "again"]) == []
    assert redis_sync.llen(client.admin.shards[0].keys.joblog(job_id)) == 1


@pytest.mark.one_shard("calls one shard's scripts")
async def test_the_log_keeps_its_last_hundred_lines_each_bounded(
    client: Client, redis_sync: redis.Redis
) -> None:
    (job_id, token), *_ = (await _leased(client)).items()
    redis_sync.rpush(client.admin.shards[0].keys.joblog(job_id), *[f"line {i}" for i in range(100)])
    rows = [1, job_id, "work", token, "dead", "", "boom", "error"]
    # a sender that cuts nothing: the line is bounded all the same (8000 bytes)
    assert await _finish(client, rows, [job_id, "x" * 9000]) == []
    kept = redis_sync.lrange(client.admin.shards[0].keys.joblog(job_id), 0, -1)
    assert len(kept) == 100 and kept[0] == b"line 1" and kept[-1] == b"x" * 8000
    record = await client.job(job_id)
    assert record is not None and record.state == "dead"


@pytest.mark.one_shard("calls one shard's scripts")
async def test_no_line_for_an_outcome_that_keeps_no_failure(
    client: Client, redis_sync: redis.Redis
) -> None:
    """Dropped (its log goes with it), aborted while it ran, or complete: no line."""
    tokens = await _leased(client, 3)
    dropped, aborted, done = sorted(tokens)
    redis_sync.hset(client.admin.shards[0].keys.job(aborted), "abort", "0")
    rows: list[Any] = [1]
    rows += [dropped, "work", tokens[dropped], "drop", "", "boom", "error"]
    rows += [aborted, "work", tokens[aborted], "retry", 10**12, "boom", "error"]
    rows += [done, "work", tokens[done], "complete", "", 0, ""]
    assert await _finish(client, rows, [i for job_id in tokens for i in (job_id, "tb")]) == []
    for job_id in tokens:
        assert not redis_sync.exists(client.admin.shards[0].keys.joblog(job_id)), job_id


@pytest.mark.one_shard("calls one shard's scripts")
@pytest.mark.parametrize(
    ("logs", "extra", "refusal"),
    [
        ("a text", (), "the logs' lines are not id, line pairs"),
        (["only an id"], (), "the logs' lines are not id, line pairs"),
        (["id", 5], (), "the logs' line 1 is not an id and a text"),
        (["id", "tb", ["nested"], "tb"], (), "the logs' line 2 is not an id and a text"),
        ([], ("one too many",), "optionally complete_max and the logs' lines, not 5 arguments"),
    ],
)
async def test_a_malformed_log_argument_is_refused_whole(
    client: Client, redis_sync: redis.Redis, logs: Any, extra: tuple[str, ...], refusal: str
) -> None:
    (job_id, token), *_ = (await _leased(client)).items()
    rows = [1, job_id, "work", token, "retry", 10**12, "boom", "error"]
    with pytest.raises(redis.exceptions.ResponseError, match=refusal):
        await _finish(client, rows, logs, *extra)
    record = await client.job(job_id)
    assert record is not None and record.state == "running"  # the lease stays
    assert redis_sync.hget(client.admin.shards[0].keys.job(job_id), "token") == token.encode()
    assert not redis_sync.exists(client.admin.shards[0].keys.joblog(job_id))


async def test_a_traceback_through_a_file_named_in_no_utf8_is_kept(
    client: Client, redis_url: str, namespace: str
) -> None:
    """A file name that is not UTF-8 (lone surrogates in Python) is written with a
    stand-in: the finish call that carries it goes through, its other outcomes too."""
    space: dict[str, Any] = {}
    source = "def fetch(n):\n    raise ValueError(f'refused {n}')\n"
    exec(compile(source, "/srv/app/t\udcf6pfer.py", "exec"), space)
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))

    @pool.job(max_fails=1)
    async def legacy(n: int) -> None:
        space["fetch"](n)

    @pool.job
    async def fine() -> str:
        return "ok"

    job = await client.enqueue("legacy", 3)
    other = await client.enqueue("fine")
    async with pool.running(client=client):
        await wait_until(lambda: _state_is(client, job.id, "dead"), within=20)
        await wait_until(lambda: _state_is(client, other.id, "complete"), within=20)
    (line,) = await client.job_log(job.id)
    assert 'File "/srv/app/t?pfer.py", line 2, in fetch' in line
    assert line.endswith("ValueError: refused 3")
