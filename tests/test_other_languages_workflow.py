"""A dependent job enqueued from other languages, run by a Python pool after its parent.

docs/protocol.md tells services in other languages how to enqueue a job that waits for
another: by the enqueue script (``EVAL``/``EVALSHA`` of its text, or ``FCALL`` of the
library's function) with the parents' ids as ``ARGV[10]``, or by plain commands in
``WATCH``/``MULTI``/``EXEC``. Here a Node.js program (tests/other_languages/producer.cjs,
on ioredis, which the fixture below installs with npm) and ``redis-cli`` do exactly what
the doc says, and a Python pool runs the parent, then the child, which sees the parent's
result in ``ctx.parent_results``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import redis

from rota import Client, JobContext, WorkerPool
from rota.protocol.shards import shard_of, shard_tags
from tests.helpers import namespace_keys, pool_settings, wait_until
from tests.redis_server import RedisServer

IOREDIS = "ioredis@5"
PRODUCER = Path(__file__).parent / "other_languages" / "producer.cjs"
NPM_TIMEOUT = 150  # seconds; a cached install takes none

# The first run installs ioredis within the first test's time.
pytestmark = pytest.mark.timeout(NPM_TIMEOUT + 60)

# The commands docs/protocol.md gives for the script's and the library's text.
ENQUEUE_SCRIPT = "from rota.protocol.scripts import script; print(script('enqueue').source, end='')"
LIBRARY = "from rota.protocol.render import library; print(library().code, end='')"


# -- ioredis, installed once and cached --------------------------------------------------


def _ioredis_in(prefix: Path) -> bool:
    """Whether ``prefix`` holds a complete install of ioredis 5."""
    manifest = prefix / "node_modules" / "ioredis" / "package.json"
    try:
        version = str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return False
    return version.split(".")[0] == "5"


def _tool(
    name: str, hint: str = "Node.js 20 and npm (Debian/Ubuntu: apt-get install nodejs npm)"
) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: these tests need {hint}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def node_modules(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ioredis, installed by npm into the pytest cache on the first run and kept there.

    npm installs into a fresh directory that is renamed into place only once complete,
    so an install cut short is never taken for a good one; a broken cache is replaced.
    """
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    root = cache.mkdir("rota-ioredis") if cache is not None else tmp_path_factory.mktemp("npm")
    target = root / IOREDIS.replace("@", "-")
    if _ioredis_in(target):
        return target / "node_modules"
    _tool("node")
    npm = _tool("npm")
    staging = Path(tempfile.mkdtemp(prefix="installing-", dir=root))
    command = [
        npm,
        "install",
        "--no-save",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--ignore-scripts",
        "--loglevel=error",
        "--prefix",
        str(staging),
        IOREDIS,
    ]
    try:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=NPM_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"npm did not install {IOREDIS} within {NPM_TIMEOUT} s: {shlex.join(command)}",
                pytrace=False,
            )
        if done.returncode != 0 or not _ioredis_in(staging):
            pytest.fail(
                f"npm could not install {IOREDIS} (exit code {done.returncode}): "
                f"{shlex.join(command)}\n{done.stdout}{done.stderr}",
                pytrace=False,
            )
        if target.exists() and not _ioredis_in(target):
            shutil.rmtree(target)
        try:
            staging.rename(target)
        except OSError:
            if not _ioredis_in(target):  # another run may have just put its own in place
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / "node_modules"


@pytest.fixture(scope="session")
def lua_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rota-enqueue.lua and rota-library.lua, written by the documented commands."""
    out = tmp_path_factory.mktemp("lua")
    for name, code in [("rota-enqueue.lua", ENQUEUE_SCRIPT), ("rota-library.lua", LIBRARY)]:
        with (out / name).open("w") as f:
            subprocess.run([sys.executable, "-c", code], stdout=f, check=True, timeout=60)
    return out


# -- the producers -----------------------------------------------------------------------


def job(job_id: str, label: str, after: Iterable[str] = ()) -> dict[str, Any]:
    """A job of the Node producer's request: a ``step`` with keyword args."""
    return {"id": job_id, "name": "step", "args": args_of(label), "after": list(after)}


def args_of(label: str) -> str:
    return '{"label": "' + label + '"}'  # JSON text, stored as is (note the space)


async def node(node_modules: Path, **request: Any) -> list[dict[str, Any]]:
    """Run the Node producer; its replies, one per job."""
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [_tool("node"), str(PRODUCER), json.dumps(request)],
            env={**os.environ, "NODE_PATH": str(node_modules)},
            check=False,
        )
    assert done.returncode == 0, f"the Node producer failed:\n{done.stderr.decode()}"
    replies: list[dict[str, Any]] = json.loads(done.stdout)["replies"]
    return replies


async def redis_cli_enqueue(
    port: int, lua_dir: Path, prefix: str, job_id: str, label: str, after: str | None
) -> tuple[int, str]:
    """The documented ``redis-cli --eval`` line, run by a shell; its exit code and what
    redis-cli printed."""
    cli = _tool("redis-cli", "redis-cli (Debian/Ubuntu: apt-get install redis-tools)")
    line = (
        f"{shlex.quote(cli)} -p {port} --eval rota-enqueue.lua {shlex.quote(prefix)} , "
        f'{shlex.quote(job_id)} step {shlex.quote(args_of(label))} "$(date +%s%3N)" '
        "0 '' 0 '' ''"
    )
    if after is not None:
        line += " " + shlex.quote(after)
    with anyio.fail_after(30):
        done = await anyio.run_process(["bash", "-c", line], cwd=lua_dir, check=False)
    return done.returncode, done.stdout.decode() + done.stderr.decode()


# -- reading Redis ------------------------------------------------------------------------


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def hash_of(r: redis.Redis, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in cast(dict[bytes, bytes], r.hgetall(key)).items()}


def snapshot(r: redis.Redis, namespace: str) -> dict[str, bytes | None]:
    """Every key of the namespace with its value (DUMP), to show that nothing changed."""
    return {k: r.dump(k) for k in namespace_keys(r, namespace)}


def check_enqueued(r: redis.Redis, namespace: str, a: str, b: str, before: int) -> None:
    """A is queued and has a child; B waits for A, in ``{ns}:waiting`` and in no queue:
    the same records whichever way they were written."""
    p = "{" + namespace + "}:"
    common = {"name": "step"}  # no zero counters (v3), no state while queued (v4)
    ha, hb = hash_of(r, p + "job:" + a), hash_of(r, p + "job:" + b)
    for h in (ha, hb):
        assert before <= int(h.pop("enqueued_at")) <= int(time.time() * 1000)
    assert ha == {**common, "args": args_of("a"), "children": "1"}
    assert hb == {
        **common,
        "args": args_of("b"),
        "state": "waiting",
        "after": a,
        "deps": "1",
        "pending": "1",
    }
    assert r.zscore(p + "waiting", b) == float(r.hget(p + "job:" + b, "enqueued_at") or 0)
    assert r.zcard(p + "waiting") == 1
    assert r.lrange(p + "queue:step", 0, -1) == [a.encode()]
    assert r.smembers(p + "children:" + a) == {b.encode()}
    assert r.smembers(p + "names") == {b"step"}
    assert r.lrange(p + "wake:step", 0, -1) == [b"1"]  # from A; a waiting job wakes nobody


# -- the pool ----------------------------------------------------------------------------


def result_of(label: str) -> dict[str, Any]:
    return {"label": label, "upper": label.upper(), "items": [1, 2, 3]}


async def run_pool(
    client: Client, redis_url: str, namespace: str, ran: list[tuple[str, str, dict[str, Any]]]
) -> int:
    """Run a pool until every job of the namespace completed; how many it ran."""
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=600))
    before = len(ran)

    @pool.job(max_fails=1)
    async def step(ctx: JobContext, label: str) -> dict[str, Any]:
        ran.append((label, ctx.id, dict(ctx.parent_results)))
        return result_of(label)

    async def all_done() -> bool:
        sizes = await client.admin.job_set_sizes()
        queued = await client.admin.shards[0].redis.llen(client.admin.shards[0].keys.queue("step"))
        running = await client.admin.shards[0].redis.zcard(
            client.admin.shards[0].keys.running("step")
        )
        return sizes["waiting"] == 0 and queued == 0 and running == 0 and len(ran) > before

    async with pool.running(client=client):
        await wait_until(all_done, within=10)
    return len(ran) - before


async def check_ran_in_order(
    client: Client, r: redis.Redis, ran: list[tuple[str, str, dict[str, Any]]], a: str, b: str
) -> None:
    """A ran, then B, each once; B saw A's result; nothing else ran or failed."""
    assert ran == [("a", a, {}), ("b", b, {a: result_of("a")})]
    ra, rb = await client.job(a), await client.job(b)
    assert ra is not None and rb is not None
    assert (ra.state, rb.state) == ("complete", "complete")
    assert ra.finished_at is not None and rb.started_at is not None
    assert ra.finished_at <= rb.started_at
    assert json.loads(
        text(cast(bytes | None, r.hget(client.admin.shards[0].keys.job(b), "r:" + a))) or ""
    ) == result_of("a")
    await check_counts(client, processed=2)


async def check_counts(client: Client, processed: int) -> None:
    stats = await client.admin.stats()
    assert stats.get("processed") == processed
    assert stats.get("processed:step") == processed
    assert not stats.get("failed") and not stats.get("dead")
    sizes = await client.admin.job_set_sizes()
    assert not any(sizes.values()), sizes


# -- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["script", "fcall"])
async def test_node_enqueues_a_dependent_job_by_the_enqueue_script(
    mode: str,
    node_modules: Path,
    lua_dir: Path,
    client: Client,
    redis_sync: redis.Redis,
    redis_url: str,
    namespace: str,
) -> None:
    """(a) ioredis calls the enqueue script (EVALSHA, else EVAL) or its FCALL function."""
    if mode == "fcall" and int(str(redis_sync.info("server")["redis_version"]).split(".")[0]) < 7:
        pytest.skip("functions (FCALL) need Redis 7 or newer")
    prefix = "{" + namespace + "}:"
    request = {
        "url": redis_url,
        "prefix": prefix,
        "mode": mode,
        "script": str(lua_dir / "rota-enqueue.lua"),
        "library": str(lua_dir / "rota-library.lua"),
    }
    a, b = "report-a", "report-b"
    before = int(time.time() * 1000)
    replies = await node(node_modules, **request, jobs=[job(a, "a"), job(b, "b", [a])])
    assert replies == [{"reply": [a, 1]}, {"reply": [b, 1]}]
    check_enqueued(redis_sync, namespace, a, b, before)

    # A parent that does not exist: the NOPARENT error reply, and nothing written, not
    # even the link to the parent that does exist.
    kept = snapshot(redis_sync, namespace)
    replies = await node(node_modules, **request, jobs=[job("report-c", "c", [a, "nope"])])
    assert replies == [
        {
            "error": "NOPARENT parent nope of job report-c does not exist "
            "(never enqueued, or its record expired)"
        }
    ]
    assert snapshot(redis_sync, namespace) == kept

    # The same id again: nothing new, the script answers created 0.
    replies = await node(node_modules, **request, jobs=[job(b, "b", [a])])
    assert replies == [{"reply": [b, 0]}]

    ran: list[tuple[str, str, dict[str, Any]]] = []
    assert await run_pool(client, redis_url, namespace, ran) == 2
    await check_ran_in_order(client, redis_sync, ran, a, b)


async def test_node_enqueues_a_dependent_job_by_plain_commands(
    node_modules: Path,
    client: Client,
    redis_sync: redis.Redis,
    redis_url: str,
    namespace: str,
) -> None:
    """(b) ioredis writes the parent in MULTI/EXEC and the child in WATCH/MULTI/EXEC."""
    request = {"url": redis_url, "prefix": "{" + namespace + "}:", "mode": "plain"}
    a, b = "order-1001", "report-1"
    before = int(time.time() * 1000)
    # Another producer touches A between the child's read and its EXEC: EXEC answers nil
    # and the producer starts again, as the doc says.
    replies = await node(node_modules, **request, race=True, jobs=[job(a, "a"), job(b, "b", [a])])
    assert [r["attempts"] for r in replies] == [1, 2]
    assert all(r["reply"] is not None for r in replies)
    check_enqueued(redis_sync, namespace, a, b, before)

    # A parent that does not exist: the producer stops, and writes nothing.
    kept = snapshot(redis_sync, namespace)
    replies = await node(node_modules, **request, jobs=[job("report-x", "x", [a, "nope"])])
    assert replies == [{"error": "parent nope of job report-x does not exist"}]
    assert snapshot(redis_sync, namespace) == kept

    ran: list[tuple[str, str, dict[str, Any]]] = []
    assert await run_pool(client, redis_url, namespace, ran) == 2
    await check_ran_in_order(client, redis_sync, ran, a, b)

    # A child of a parent complete already: queued at once, with deps 1 and A's result
    # copied as r:<A> ("enqueue the job as in (a) with deps 1 and the r: fields").
    c = "report-2"
    replies = await node(node_modules, **request, jobs=[job(c, "c", [a])])
    assert replies[0]["attempts"] == 1
    hc = hash_of(redis_sync, client.admin.shards[0].keys.job(c))
    assert int(hc.pop("enqueued_at")) >= before
    assert hc == {
        "name": "step",
        "args": args_of("c"),
        "deps": "1",
        "r:" + a: json.dumps(result_of("a"), separators=(",", ":")),
    }
    assert await run_pool(client, redis_url, namespace, ran) == 1
    assert ran[2] == ("c", c, {a: result_of("a")})
    await check_counts(client, processed=3)


async def test_redis_cli_enqueues_a_dependent_job(
    lua_dir: Path,
    client: Client,
    redis_server: RedisServer,
    redis_sync: redis.Redis,
    redis_url: str,
    namespace: str,
) -> None:
    """(c) ``redis-cli --eval rota-enqueue.lua '{ns}:' , <id> … '<parent ids>'``."""
    prefix = "{" + namespace + "}:"
    a, b = "order-1001", "report-2"
    before = int(time.time() * 1000)
    port = redis_server.port
    assert await redis_cli_enqueue(port, lua_dir, prefix, a, "a", None) == (0, f"{a}\n1\n")
    assert await redis_cli_enqueue(port, lua_dir, prefix, b, "b", a) == (0, f"{b}\n1\n")
    check_enqueued(redis_sync, namespace, a, b, before)

    # redis-cli 7.0 exits 0 after an error reply; later ones may exit 1.
    kept = snapshot(redis_sync, namespace)
    code, out = await redis_cli_enqueue(port, lua_dir, prefix, "report-3", "c", f"{a} nope")
    assert code in (0, 1)
    assert out.strip() == (
        "NOPARENT parent nope of job report-3 does not exist (never enqueued, or its record"
        " expired)"
    )
    assert snapshot(redis_sync, namespace) == kept

    ran: list[tuple[str, str, dict[str, Any]]] = []
    assert await run_pool(client, redis_url, namespace, ran) == 2
    await check_ran_in_order(client, redis_sync, ran, a, b)


# -- a namespace over several shards ------------------------------------------------------

SHARDED = Path(__file__).parent / "other_languages" / "sharded.cjs"


async def sharded(node_modules: Path, request: dict[str, Any]) -> Any:
    """What the sharded Node producer tells of ``request``: its tags and placements."""
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [_tool("node"), str(SHARDED), json.dumps(request)],
            env={**os.environ, "NODE_PATH": str(node_modules)},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def test_a_node_producer_enqueues_into_every_shard_as_the_protocol_says(
    node_modules: Path, redis_server: RedisServer, namespace: str
) -> None:
    """The Node program derives the shards' tags and routes by the documented rule alone;
    a Python pool over the same four shards runs every job, each found where its id
    says."""
    shards = 4
    jobs = [{"id": f"node-{i}", "name": "step", "args": args_of(f"j{i}")} for i in range(40)]
    request = {"url": redis_server.url, "namespace": namespace, "shards": shards, "jobs": jobs}
    told = await sharded(node_modules, request)
    assert told["tags"] == list(shard_tags(namespace, shards))
    assert {p["shard"] for p in told["placed"]} == set(range(shards))  # all four used
    assert all(p["shard"] == shard_of(p["id"], shards) for p in told["placed"])

    ran: list[str] = []
    settings = pool_settings(redis_server.url, namespace, shards=shards, keep_result=600)
    pool = WorkerPool(settings=settings)

    @pool.job
    async def step(ctx: JobContext, label: str) -> None:
        ran.append(ctx.id)

    async with Client.from_url(redis_server.url, namespace, shards=shards) as client:
        async with pool.running(client=client):
            await wait_until(lambda: len(ran) == len(jobs), within=20)
        assert sorted(ran) == sorted(j["id"] for j in jobs)
        for j in jobs[:8]:
            record = await client.job(j["id"])
            assert record is not None and record.state == "complete"


async def test_a_node_producer_and_a_python_one_keep_an_ordered_names_order(
    node_modules: Path, redis_server: RedisServer, namespace: str
) -> None:
    """Node and Python producers of an ordered name, in turn, by the documented rule
    alone: every job in the shard its name names, and one worker starts them in order."""
    shards, url = 4, redis_server.url
    started: list[str] = []
    pool = WorkerPool(settings=pool_settings(url, namespace, shards=shards, concurrency=1))

    @pool.job
    async def step(ctx: JobContext, label: str) -> None:
        started.append(label)

    async with Client.from_url(url, namespace, shards=shards, ordered="step") as client:
        for turn in range(10):
            jobs = [{"id": f"node-{turn}", "name": "step", "args": args_of(f"{turn}a")}]
            request = {"url": url, "namespace": namespace, "shards": shards, "jobs": jobs}
            told = await sharded(node_modules, {**request, "ordered": ["step"]})
            assert told["placed"][0]["shard"] == shard_of("step", shards)
            await client.enqueue("step", label=f"{turn}b")
        async with pool.running(client=client):
            await wait_until(lambda: len(started) == 20, within=20)
    assert started == [f"{turn}{side}" for turn in range(10) for side in "ab"]


@pytest.mark.one_shard("the script is called on one shard's prefix")
async def test_node_enqueues_jobs_with_fair_keys_by_the_enqueue_script(
    node_modules: Path, lua_dir: Path, client: Client, redis_sync: redis.Redis, redis_url: str
) -> None:
    """ARGV[14] of the enqueue script is the job's fair key: stored as ``fair``, the job
    queued in its key's list, and a pool runs the keys' jobs in turns."""
    namespace = client.options.namespace
    prefix = "{" + namespace + "}:"
    request = {"url": redis_url, "prefix": prefix, "mode": "script"}
    request["script"] = str(lua_dir / "rota-enqueue.lua")
    jobs = [{**job(f"t1-{i}", f"t1-{i}"), "fair_key": "tenant-1"} for i in range(3)]
    jobs += [{**job("t2-0", "t2-0"), "fair_key": "tenant-2"}]
    replies = await node(node_modules, **request, jobs=jobs)
    assert replies == [{"reply": [j["id"], 1]} for j in jobs]
    assert redis_sync.hget(prefix + "job:t1-0", "fair") == b"tenant-1"
    assert redis_sync.llen(prefix + "fqueue:step/tenant-1") == 3
    assert redis_sync.llen(prefix + "queue:step") == 0
    record = await client.job("t2-0")
    assert record is not None and record.fair_key == "tenant-2"

    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=1))
    ran: list[str] = []

    @pool.job
    async def step(ctx: JobContext, label: str) -> None:
        ran.append(label)

    async with pool.running(client=client):
        await wait_until(lambda: len(ran) == 4, within=10)
    assert ran == ["t1-0", "t2-0", "t1-1", "t1-2"]  # the keys take turns, FIFO within one
