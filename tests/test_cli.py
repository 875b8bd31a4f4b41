"""Every operator command in a subprocess against the real Redis: exit codes and output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
import redis

from rota import Client, JobContext, JobSpec, WorkerPool, __version__
from tests.cli_helpers import rota_env, rota_json, run_rota
from tests.helpers import pool_settings, step_pool, wait_until


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


def test_version_and_help() -> None:
    done = run_rota("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"rota, version {__version__}")
    done = run_rota("--help")
    assert done.returncode == 0
    for command in ("worker", "enqueue", "status", "queue", "dead", "job", "demo", "group"):
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
    assert abs(record.run_at - (time.time() + 600)) < 30

    at = rota_json("enqueue", "nap", "--at", "2031-01-02T03:04:05+00:00", *conn)
    record = await client.job(at["id"])
    assert record is not None
    assert record.run_at == 1925089445

    keyed = rota_json("enqueue", "nap", "--fair-key", "tenant-1", *conn)
    record = await client.job(keyed["id"])
    assert record is not None and record.fair_key == "tenant-1"
    bad = run_rota("enqueue", "nap", "--fair-key", "two words", *conn)
    assert bad.returncode == 2 and "fair_key must be" in bad.stderr

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


def test_enqueue_bad_name_exits_2_like_the_queue_commands(conn: tuple[str, ...]) -> None:
    for name in ("bad name", "bad!name"):
        done = run_rota("enqueue", name, *conn)
        assert done.returncode == 2
        assert "invalid job name" in done.stderr
        assert run_rota("queue", "pause", name, *conn).returncode == 2


def test_a_reader_that_leaves_early_ends_the_command_quietly(
    conn: tuple[str, ...], redis_sync: redis.Redis, namespace: str
) -> None:
    """`rota job show ID | head -2`: the pipe closes while rota still writes. That is no
    Redis failure (it once said "Broken pipe" as one, exit 1): exit 0, nothing on stderr."""
    big = run_rota("enqueue", "nap", "--args", json.dumps(["x" * 100_000]), "--json", *conn)
    job_id = json.loads(big.stdout)["id"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota", "job", "show", job_id, *conn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=rota_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # the first line, then the reader goes
    proc.stdout.close()
    with proc.stderr:
        assert proc.wait(timeout=30) == 0
        assert proc.stderr.read() == b""


async def test_status_json_and_table(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    for _ in range(3):
        await client.enqueue("nap", seconds=0)
    await client.admin.set_limit("nap", 2)
    await client.admin.pause("other")
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
        # times in seconds since the epoch, as the Python API has them
        assert all(abs(t - time.time()) < 60 for t in (busy["since"], p["last_heartbeat"]))
        table = await anyio.to_thread.run_sync(lambda: run_rota("status", *conn))
        assert table.returncode == 0
        assert "# queues" in table.stdout
        assert "working hard" in table.stdout
        await client.abort(job.id)


async def _busy(client: Client) -> bool:
    pools = await client.admin.pools()
    return bool(pools) and bool(pools[0].busy)


async def test_queue_pause_resume_clear(conn: tuple[str, ...], client: Client) -> None:
    for _ in range(4):
        await client.enqueue("nap")
    assert run_rota("queue", "pause", "nap", *conn).returncode == 0
    (q,) = await client.admin.queues(["nap"])
    assert q.paused
    assert run_rota("queue", "resume", "nap", *conn).returncode == 0
    (q,) = await client.admin.queues(["nap"])
    assert not q.paused
    refused = run_rota("queue", "clear", "nap", *conn, input="n\n")
    assert refused.returncode == 1
    (q,) = await client.admin.queues(["nap"])
    assert q.size == 4
    done = run_rota("queue", "clear", "nap", "--yes", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 4 jobs")
    (q,) = await client.admin.queues(["nap"])
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
    (q,) = await client.admin.queues(["nap"])
    assert q.size == 1
    done = run_rota("dead", "delete", ids[1], "--yes", *conn)
    assert done.stdout.strip() == "deleted 1 jobs"
    assert run_rota("dead", "delete", "--all", *conn, input="n\n").returncode == 1
    assert (await client.admin.page("dead")).total == 3
    done = run_rota("dead", "delete", "--all", "--yes", *conn)
    assert done.stdout.strip() == "deleted 3 jobs"
    assert (await client.admin.page("dead")).total == 0


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
    record = await client.job(job.id)
    assert record is not None and record.enqueued_at is not None
    enqueued = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.enqueued_at))
    assert f"enqueued_at  {enqueued}" in text.stdout
    missing = run_rota("job", "show", "nope", *conn)
    assert (missing.returncode, missing.stderr.strip()) == (1, "rota: no job nope")


def test_bad_settings_exit_2_with_one_line(conn: tuple[str, ...], tmp_path: object) -> None:
    cases = [
        (("status", "--config", "/nonexistent/rota.toml"), {}, "config: cannot read"),
        (("status",), {"ROTA_CONCURRENCY": "lots"}, "concurrency"),
        (("status",), {"ROTA_CONCURENCY": "3"}, "ROTA_CONCURENCY: unknown setting"),
        (("status", "--namespace", "bad{ns}"), {}, "--namespace: "),
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
    ("waiting", "list"),
    ("job", "show", "someid"),
    ("group", "show", "someid"),
]


def _bad_url_line(done: subprocess.CompletedProcess[str], source: str = "--redis-url") -> str:
    """The one line naming where the URL came from: the flag, or the setting and the
    environment."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"rota: {source}: "), lines
    return lines[0]


@pytest.mark.parametrize("command", _EVERY_COMMAND, ids=lambda c: c[0])
def test_a_redis_url_rota_cannot_use_exits_2_with_one_line(command: tuple[str, ...]) -> None:
    """From the environment and from --redis-url alike: the setting's name, the schemes
    rota understands, exit code 2, and never a traceback (nor a connection tried)."""
    with ThreadPoolExecutor(2) as runs:  # about a second each: both at once
        from_env = runs.submit(run_rota, *command, env=rota_env(ROTA_REDIS_URL="http://x"))
        from_flag = runs.submit(run_rota, *command, "--redis-url", "redis+foo://x")
    for done, scheme, source in (
        (from_env.result(), "http://", "redis_url"),
        (from_flag.result(), "redis+foo://", "--redis-url"),
    ):
        line = _bad_url_line(done, source)
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


async def test_enqueue_after(conn: tuple[str, ...], client: Client) -> None:
    a = await client.enqueue("nap")
    b = await client.enqueue("nap")
    done = run_rota("enqueue", "nap", "--after", a.id, "--after", b.id, *conn)
    assert done.returncode == 0, done.stderr
    record = await client.job(done.stdout.strip())
    assert record is not None
    assert (record.state, record.after, record.pending) == ("waiting", (a.id, b.id), 2)
    later = rota_json("enqueue", "nap", "--after", a.id, "--in", "1h", *conn)
    record = await client.job(later["id"])
    assert record is not None and record.state == "waiting"


def test_enqueue_after_a_missing_parent_exits_1_with_one_line(
    conn: tuple[str, ...], redis_sync: redis.Redis, namespace: str
) -> None:
    done = run_rota("enqueue", "nap", "--after", "nope", *conn)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rota: parent nope of job "), lines
    assert "does not exist" in lines[0]
    bad = run_rota("enqueue", "nap", "--after", "has space", *conn)
    assert bad.returncode == 2 and "after: invalid job id" in bad.stderr
    assert redis_sync.keys("{" + namespace + "}:*") == []


async def _states_are(client: Client, ids: list[str], state: str) -> bool:
    records = [await client.job(i) for i in ids]
    return all(r is not None and r.state == state for r in records)


async def test_job_show_lists_parents_and_children(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    a = await client.enqueue("step", label="a")
    b = await client.enqueue("step", label="b", after=[a.id])
    c = await client.enqueue("step", label="c", after=[a.id])
    d = await client.enqueue("step", label="d", after=[b.id, c.id])
    data = await anyio.to_thread.run_sync(lambda: rota_json("job", "show", b.id, *conn))
    assert data["parents"] == [{"id": a.id, "name": "step", "state": "queued"}]
    assert data["children"] == [{"id": d.id, "name": "step", "state": "waiting"}]
    assert (data["after"], data["pending"], data["group"]) == ([a.id], 1, None)
    text = (await anyio.to_thread.run_sync(lambda: run_rota("job", "show", d.id, *conn))).stdout
    assert re.search(rf"^\s+parents  {b.id}  step  waiting$", text, re.M), text
    assert re.search(rf"^\s+{c.id}  step  waiting$", text, re.M), text
    assert re.search(r"^\s+pending  2$", text, re.M), text

    async with step_pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: _states_are(client, [a.id, b.id, c.id, d.id], "complete"))
    data = await anyio.to_thread.run_sync(lambda: rota_json("job", "show", a.id, *conn))
    assert data["parents"] == []
    assert {(r["id"], r["state"]) for r in data["children"]} == {
        (b.id, "complete"),
        (c.id, "complete"),
    }
    text = (await anyio.to_thread.run_sync(lambda: run_rota("job", "show", a.id, *conn))).stdout
    assert re.search(rf"^\s+children  ({b.id}|{c.id})  step  complete$", text, re.M), text


async def test_group_show(
    conn: tuple[str, ...], client: Client, redis_url: str, namespace: str
) -> None:
    specs = [JobSpec(name="step", kwargs={"label": label}) for label in ("m0", "m1", "fail-m2")]
    g = await client.group(specs, then=JobSpec(name="step", kwargs={"label": "cb"}))
    assert g.then is not None
    members = [j.id for j in g.jobs]
    data = await anyio.to_thread.run_sync(lambda: rota_json("group", "show", g.id, *conn))
    assert (data["id"], data["total"], data["done"], data["failed"]) == (g.id, 3, 0, 0)
    assert data["finished"] is False
    assert data["then"] == {"id": g.then.id, "name": "step", "state": "waiting"}
    assert [m["id"] for m in data["members"]] == members
    text = await anyio.to_thread.run_sync(lambda: run_rota("job", "show", members[0], *conn))
    assert f"group  {g.id} (0 of 3 done, 0 failed, 3 to go)" in text.stdout
    assert f"callback  {g.then.id}  step  waiting" in text.stdout

    then_id = g.then.id
    async with step_pool(redis_url, namespace).running(client=client):
        await wait_until(lambda: _states_are(client, [then_id], "dead"))
        await wait_until(lambda: _states_are(client, members[:2], "complete"))
    done = await anyio.to_thread.run_sync(lambda: run_rota("group", "show", g.id, *conn))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"group {g.id}: 2 of 3 done, 1 failed, 0 to go (finished)"
    assert f"then {g.then.id}  step  dead" in lines
    assert f"{members[2]}\tstep\tdead" in lines
    page = await anyio.to_thread.run_sync(
        lambda: rota_json("group", "show", g.id, "--offset", "1", "--limit", "1", *conn)
    )
    assert [m["id"] for m in page["members"]] == [members[1]]
    text = await anyio.to_thread.run_sync(lambda: run_rota("job", "show", then_id, *conn))
    assert f"callback of  group {g.id} (2 of 3 done, 1 failed, 0 to go (finished))" in text.stdout
    missing = run_rota("group", "show", "nope", *conn)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "rota: no group 'nope' (never enqueued, or expired)"


async def test_waiting_list_and_delete(conn: tuple[str, ...], client: Client) -> None:
    a = await client.enqueue("nap")
    b = await client.enqueue("nap", after=[a.id])
    c = await client.enqueue("nap", after=[b.id])
    listed = rota_json("waiting", "list", *conn)
    assert listed["total"] == 2
    jobs = {j["id"]: j for j in listed["jobs"]}  # by the time they started waiting
    assert set(jobs) == {b.id, c.id}
    assert (jobs[b.id]["after"], jobs[b.id]["pending"]) == ([a.id], 1)
    text = run_rota("waiting", "list", *conn).stdout
    assert f"{c.id}\tnap\t1\t{b.id}\t" in text
    assert run_rota("waiting", "delete", *conn).returncode == 2  # neither ids nor --all
    assert run_rota("waiting", "retry", b.id, *conn).returncode == 2  # no such command
    assert run_rota("waiting", "delete", "--all", *conn, input="n\n").returncode == 1
    done = run_rota("waiting", "delete", b.id, "--yes", *conn)
    assert (done.returncode, done.stdout.strip()) == (0, "deleted 1 jobs")
    record = await client.job(c.id)  # it waited for the deleted job: it ends dead
    assert record is not None and (record.state, record.reason) == ("dead", "dependency_failed")
    assert rota_json("waiting", "list", *conn)["total"] == 0


def test_json_that_is_not_quite_json_is_refused_not_kept_as_text(conn: tuple[str, ...]) -> None:
    """`x=[1,2` silently became the string "[1,2"; a key given twice in --args silently
    kept the last value."""
    cut = run_rota("enqueue", "nap", "x=[1,2", *conn)
    assert cut.returncode == 2 and "'[1,2': it is not JSON" in cut.stderr, cut.stderr
    assert "quote it to give a string" in cut.stderr
    twice = run_rota("enqueue", "nap", "--args", '{"a": 1, "a": 2}', *conn)
    assert twice.returncode == 2 and "the key 'a' is given twice" in twice.stderr, twice.stderr
    text = run_rota("enqueue", "nap", "to=ada", "--json", *conn)
    assert text.returncode == 0, text.stderr  # plain text stays text


async def test_enqueue_takes_max_fails_timeout_and_job_id_as_the_api_does(
    conn: tuple[str, ...], client: Client
) -> None:
    done = run_rota(
        "enqueue", "report", "--max-fails", "2", "--timeout", "1m30s", "--job-id", "r-1", *conn
    )
    assert done.returncode == 0, done.stderr
    record = await client.job("r-1")
    assert record is not None and (record.max_fails, record.timeout) == (2, 90.0)
    for bad, words in (
        (("--max-fails", "0"), "--max-fails"),
        (("--timeout", "soon"), "--timeout"),
        (("--timeout", "0.1ms"), "timeout"),
        (("--job-id", "no spaces"), "invalid job id"),
    ):
        refused = run_rota("enqueue", "report", *bad, *conn)
        assert refused.returncode == 2, refused.stderr
        assert words in refused.stderr, refused.stderr
