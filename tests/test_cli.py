"""Every operator command in a subprocess against the real Redis: exit codes and output."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
import redis

from rota import Client, JobContext, WorkerPool, __version__
from tests.cli_helpers import rota_env, rota_json, run_rota
from tests.helpers import pool_settings, wait_until


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def test_version_and_help() -> None:
    done = run_rota("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"rota, version {__version__}")
    done = run_rota("--help")
    assert done.returncode == 0
    for command in ("worker", "enqueue", "status", "queue", "dead", "job", "demo"):
        assert command in done.stdout


async def test_enqueue_forms(conn: tuple[str, ...], client: Client) -> None:
    done = run_rota("enqueue", "nap", "seconds=0.5", "label=hello", *conn)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    record = await client.job(job_id)
    assert record is not None
    assert (record.state, record.args_value) == ("queued", {"seconds": 0.5, "label": "hello"})

    out = rota_json("enqueue", "nap", "--args", "[1]", *conn)
    assert out["created"] is True
    record = await client.job(out["id"])
    assert record is not None
    assert record.args == "[1]"

    later = rota_json("enqueue", "nap", "--in", "10m", *conn)
    record = await client.job(later["id"])
    assert record is not None
    assert record.state == "scheduled"
    assert record.run_at is not None
    assert abs(record.run_at / 1000 - (time.time() + 600)) < 30

    at = rota_json("enqueue", "nap", "--at", "2031-01-02T03:04:05+00:00", *conn)
    record = await client.job(at["id"])
    assert record is not None
    assert record.run_at == 1925089445000

    first = rota_json("enqueue", "nap", "--unique", "u1", *conn)
    second = run_rota("enqueue", "nap", "--unique", "u1", *conn)
    assert second.returncode == 0
    assert second.stdout.startswith(first["id"])
    assert "already enqueued" in second.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("nap", "no-equals-sign"),
        ("nap", "--args", "{broken"),
        ("nap", "--args", "42"),
        ("nap", "a=1", "--args", "{}"),
        ("nap", "--in", "soon"),
        ("nap", "--at", "yesterday"),
        ("nap", "--in", "1s", "--at", "2031-01-01T00:00:00"),
    ],
)
def test_enqueue_usage_errors_exit_2(conn: tuple[str, ...], args: tuple[str, ...]) -> None:
    done = run_rota("enqueue", *args, *conn)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip()


def test_enqueue_bad_name_exits_1(conn: tuple[str, ...]) -> None:
    done = run_rota("enqueue", "bad name", *conn)
    assert done.returncode == 1
    assert "invalid job name" in done.stderr


async def test_status_json_and_table(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    for _ in range(3):
        await client.enqueue("nap", seconds=0)
    await client.set_limit("nap", 2)
    await client.pause("other")
    data = rota_json("status", *conn)
    queues = {q["name"]: q for q in data["queues"]}
    assert queues["nap"]["size"] == 3
    assert queues["nap"]["limit"] == 2
    assert data["pools"] == []
    assert data["namespace"] == namespace

    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, keep_result=60, heartbeat_interval=0.2, lease=2
        )
    )
    started = []

    @pool.job
    async def slow(ctx: JobContext) -> None:
        await ctx.checkin("working hard")
        started.append(ctx.id)
        await anyio.sleep(30)

    job = await client.enqueue("slow")
    async with pool.running():
        await wait_until(lambda: bool(started))
        await wait_until(lambda: _busy(client))
        # in a thread: the pool shares this event loop and must keep beating meanwhile
        data = await anyio.to_thread.run_sync(lambda: rota_json("status", *conn))
        (p,) = data["pools"]
        assert (p["busy"], p["jobs"], p["stale"]) == (1, ["slow"], False)
        (busy,) = data["busy"]
        assert (busy["job_id"], busy["name"], busy["message"]) == (job.id, "slow", "working hard")
        table = await anyio.to_thread.run_sync(lambda: run_rota("status", *conn))
        assert table.returncode == 0
        assert "# queues" in table.stdout
        assert "working hard" in table.stdout
        await client.abort(job.id)


async def _busy(client: Client) -> bool:
    pools = await client.pools()
    return bool(pools) and bool(pools[0][0].busy)


async def test_queue_pause_resume_clear(conn: tuple[str, ...], client: Client) -> None:
    for _ in range(4):
        await client.enqueue("nap")
    assert run_rota("queue", "pause", "nap", *conn).returncode == 0
    (q,) = await client.queues(["nap"])
    assert q.paused
    assert run_rota("queue", "resume", "nap", *conn).returncode == 0
    (q,) = await client.queues(["nap"])
    assert not q.paused
    refused = run_rota("queue", "clear", "nap", *conn, input="n\n")
    assert refused.returncode == 1
    (q,) = await client.queues(["nap"])
    assert q.size == 4
    done = run_rota("queue", "clear", "nap", "--yes", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 4 jobs")
    (q,) = await client.queues(["nap"])
    assert q.size == 0


def _plant_dead(r: redis.Redis, namespace: str, n: int) -> list[str]:
    p = "{" + namespace + "}:"
    ids = [f"dead{i}" for i in range(n)]
    for i, jid in enumerate(ids):
        r.hset(
            p + "job:" + jid,
            mapping={
                "name": "nap",
                "args": "{}",
                "state": "dead",
                "reason": "error",
                "error": f"boom {i}",
                "attempts": 1,
                "finished_at": 1000 + i,
            },
        )
        r.zadd(p + "dead", {jid: 1000 + i})
    return ids


async def test_dead_list_retry_delete(
    conn: tuple[str, ...], client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    ids = _plant_dead(redis_sync, namespace, 5)
    listed = rota_json("dead", "list", *conn)
    assert listed["total"] == 5
    assert [j["id"] for j in listed["jobs"]] == ids[::-1]
    assert listed["jobs"][0]["error"] == "boom 4"
    assert "boom 4" in run_rota("dead", "list", *conn).stdout

    assert run_rota("dead", "retry", *conn).returncode == 2  # neither ids nor --all
    done = run_rota("dead", "retry", ids[0], *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "retried 1 jobs")
    (q,) = await client.queues(["nap"])
    assert q.size == 1
    done = run_rota("dead", "delete", ids[1], "--yes", *conn)
    assert done.stdout.strip() == "deleted 1 jobs"
    assert run_rota("dead", "delete", "--all", *conn, input="n\n").returncode == 1
    assert (await client.page("dead")).total == 3
    done = run_rota("dead", "delete", "--all", "--yes", *conn)
    assert done.stdout.strip() == "deleted 3 jobs"
    assert (await client.page("dead")).total == 0


async def test_job_show(conn: tuple[str, ...], client: Client) -> None:
    job = await client.enqueue("nap", seconds=1)
    data = rota_json("job", "show", job.id, *conn)
    assert (data["id"], data["name"], data["state"], data["args"]) == (
        job.id,
        "nap",
        "queued",
        '{"seconds":1}',
    )
    text = run_rota("job", "show", job.id, *conn)
    assert "queued" in text.stdout
    missing = run_rota("job", "show", "nope", *conn)
    assert (missing.returncode, missing.stderr.strip()) == (1, "rota: no job nope")


def test_bad_settings_exit_2_with_one_line(conn: tuple[str, ...], tmp_path: object) -> None:
    cases = [
        (("status", "--config", "/nonexistent/rota.toml"), {}, "config: cannot read"),
        (("status",), {"ROTA_CONCURRENCY": "lots"}, "concurrency"),
        (("status",), {"ROTA_CONCURENCY": "3"}, "ROTA_CONCURENCY: unknown setting"),
        (("status", "--namespace", "bad{ns}"), {}, "namespace"),
        (("status", "--redis-url", "redis://127.0.0.1:1/0"), {}, "redis_url: cannot connect"),
    ]
    for args, env, message in cases:
        done = run_rota(*args, env=rota_env(**env))
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert message in lines[0], lines


_EVERY_COMMAND = [
    ("worker", "tests.cli_app:pool"),
    ("web",),
    ("demo",),
    ("enqueue", "nap"),
    ("status",),
    ("queue", "pause", "nap"),
    ("dead", "list"),
    ("job", "show", "someid"),
]


def _bad_url_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("rota: redis_url: "), lines
    return lines[0]


@pytest.mark.parametrize("command", _EVERY_COMMAND, ids=lambda c: c[0])
def test_a_redis_url_rota_cannot_use_exits_2_with_one_line(command: tuple[str, ...]) -> None:
    """From the environment and from --redis-url alike: the setting's name, the schemes
    rota understands, exit code 2, and never a traceback (nor a connection tried)."""
    with ThreadPoolExecutor(2) as runs:  # about a second each: both at once
        from_env = runs.submit(run_rota, *command, env=rota_env(ROTA_REDIS_URL="http://x"))
        from_flag = runs.submit(run_rota, *command, "--redis-url", "redis+foo://x")
    for done, scheme in ((from_env.result(), "http://"), (from_flag.result(), "redis+foo://")):
        line = _bad_url_line(done)
        assert f"unknown scheme {scheme}" in line, line
        assert "redis://, rediss:// and unix://" in line, line


def test_more_redis_urls_rota_cannot_use() -> None:
    cases = [
        ("garbage", "not a URL"),
        ("redis://127.0.0.1:port/0", "Port could not be cast"),
        ("http://user:s3cret@x", "unknown scheme http:// in 'http://user:***@x'"),
    ]
    with ThreadPoolExecutor(len(cases)) as runs:
        done = list(runs.map(lambda c: run_rota("status", "--redis-url", c[0]), cases))
    for (_, why), result in zip(cases, done, strict=True):
        line = _bad_url_line(result)
        assert why in line, line
        assert "s3cret" not in line
