"""Each ACL role of docs/operations.md, with only its rules, on a real Redis.

A pool under the worker role runs jobs enqueued by a producer under the producer role
(through rota's client and through the plain commands of docs/protocol.md): they run,
retry, die and wait for their time. The producer cannot delete the dead set or call any
function but the enqueue ones; the read-only web UI shows pages and is refused a retry;
its operator variant retries and deletes.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest
import redis
import redis.exceptions
from structlog.testing import capture_logs

from rota import Client, Debounce, JobContext, JobSpec, RedisRefused, Settings, State, WorkerPool
from rota.acl import ROLES, rules, setuser
from rota.protocol.keys import Keys
from rota.protocol.render import library
from rota.protocol.shards import shard_of
from rota.web import create_app
from tests.cli_helpers import REPO, rota_env, run_rota
from tests.conftest import SHARDS
from tests.helpers import pool_settings, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        version = s.client().info("server")["redis_version"]
        if int(str(version).split(".")[0]) < 7:
            pytest.skip(f"the roles use Redis 7's FCALL and key selectors; this is {version}")
        yield s


def make_user(server: RedisServer, role: str, namespace: str) -> tuple[str, str]:
    user, password = f"{role}-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    server.client().execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *rules(role, namespace, SHARDS)
    )
    return user, password


def settings_for(server: RedisServer, role: str, namespace: str, **changes: object) -> Settings:
    """Settings of a user of ``role``: the password as a setting, not in the URL."""
    user, password = make_user(server, role, namespace)
    return pool_settings(
        server.url,
        namespace,
        redis_username=user,
        redis_password=password,
        keep_result=60,
        **changes,
    )


@pytest.fixture
async def admin(server: RedisServer, namespace: str) -> AsyncIterator[Client]:
    async with Client.from_url(server.url, namespace, shards=SHARDS) as c:
        yield c


async def _state(client: Client, job_id: str, state: State) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


def plain_enqueue(r: redis.Redis, namespace: str, job_id: str, name: str, args: str) -> None:
    """The transaction of plain commands of docs/protocol.md, as another language sends it,
    into the shard the job's id names."""
    keys = Keys(namespace, shard_of(job_id, SHARDS), SHARDS)
    now = int(time.time() * 1000)
    with r.pipeline(transaction=True) as pipe:
        pipe.hset(
            keys.job(job_id),
            mapping={"name": name, "args": args, "enqueued_at": now, "state": "queued",
                     "attempts": 0, "failures": 0, "lost": 0, "token": 0},
        )  # fmt: skip
        pipe.lpush(keys.queue(name), job_id)
        pipe.sadd(keys.names, name)
        pipe.lpush(keys.wake(name), 1)
        pipe.ltrim(keys.wake(name), 0, 9)
        pipe.execute()


def test_every_role_is_accepted_by_redis(server: RedisServer, namespace: str) -> None:
    admin = server.client()
    for role in ROLES:
        line = setuser(role, f"check-{role}", namespace, password="secret")
        admin.execute_command(*line.split()[:2], *line.split()[2:])  # type: ignore[no-untyped-call]
        assert admin.execute_command("ACL", "GETUSER", f"check-{role}")  # type: ignore[no-untyped-call]
    with pytest.raises(ValueError, match="unknown role"):
        rules("admin")


async def test_a_worker_role_runs_what_a_producer_role_enqueues(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    worker = settings_for(server, "worker", namespace)
    producer_settings = settings_for(server, "producer", namespace)
    pool = WorkerPool(settings=worker)
    tries: dict[str, int] = {}

    @pool.job()
    async def double(ctx: JobContext, x: int) -> int:
        return 2 * x

    @pool.job(max_fails=3, backoff=lambda n: 0.05)
    async def flaky(ctx: JobContext, key: str) -> str:
        tries[key] = tries.get(key, 0) + 1
        if tries[key] < 2:
            raise RuntimeError("first attempt fails")
        return "mended"

    @pool.job(max_fails=2, backoff=lambda n: 0.05)
    async def broken(ctx: JobContext) -> None:
        raise RuntimeError("always")

    async with pool.running() as rt, Client.from_settings(producer_settings) as producer:
        now = await producer.enqueue("double", 21)
        retried = await producer.enqueue("flaky", "k")
        dead = await producer.enqueue("broken")
        later = await producer.enqueue_in(0.3, "double", 5)
        keyed = await producer.enqueue("double", 3, fair_key="tenant-1")
        unique = await producer.enqueue("double", 1, unique="once")
        again = await producer.enqueue("double", 1, unique="once")
        assert again.id == unique.id and not again.created
        for n in (2, 3):  # a debounced enqueue, then one its pending job takes in
            debounced = await producer.enqueue(
                "double", n, debounce=Debounce("acl", 0.2, "replace")
            )
        assert not debounced.created
        with server.client(username=producer_settings.redis_username,
                           password=producer_settings.redis_password) as r:  # fmt: skip
            plain_enqueue(r, namespace, "plain-1", "double", "[4]")
        assert await producer.wait(now.id, timeout=15) == 42  # the producer may wait
        for job_id in (now.id, retried.id, later.id, unique.id, "plain-1", debounced.id, keyed.id):
            await wait_until(functools.partial(_state, admin, job_id, State.COMPLETE), within=15)
        await wait_until(lambda: _state(admin, dead.id, State.DEAD), within=15)
    results = {j: (await admin.job(j)) for j in (now.id, later.id, "plain-1", retried.id)}
    assert [r.result if r else None for r in results.values()] == ["42", "10", "8", '"mended"']
    assert tries == {"k": 2}
    # neither role was refused the library
    assert rt.script_mode.functions and producer.admin.shards[0].script_mode.functions


async def test_a_worker_role_finishes_a_job_someone_already_waits_on(
    server: RedisServer, namespace: str
) -> None:
    """The wait starts before the job finishes, so the finish must tell the waiter
    (PUBLISH): the printed worker role allows it, and the pool stays up."""
    worker = settings_for(server, "worker", namespace)
    producer_settings = settings_for(server, "producer", namespace)
    pool = WorkerPool(settings=worker)
    started, release = anyio.Event(), anyio.Event()

    @pool.job()
    async def slow(ctx: JobContext, x: int) -> int:
        started.set()
        await release.wait()
        return x + 1

    async with pool.running(), Client.from_settings(producer_settings) as producer:
        job = await producer.enqueue("slow", 1)
        await started.wait()
        async with anyio.create_task_group() as tg:
            results: list[object] = []

            async def wait() -> None:
                results.append(await producer.wait(job.id, timeout=15))

            tg.start_soon(wait)
            await anyio.sleep(0.2)  # the wait is listening before the finish
            release.set()
        assert results == [2]
        assert (await producer.enqueue("slow", 5)).created  # the pool still runs
        assert await producer.wait((await producer.enqueue("slow", 6)).id, timeout=15) == 7


async def test_a_pool_refused_a_finish_stays_up_and_runs_on(
    server: RedisServer, namespace: str
) -> None:
    """No error reply ends a pool: under a role without PUBLISH a finish that tells a
    waiter is refused; the pool logs it once, keeps running other jobs, and does not
    hold the refused outcome: the job's lease expires and the reaper takes it."""
    user, password = f"nopub-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    without = [r for r in rules("worker", namespace, SHARDS) if r != "+publish"]
    server.client().execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *without
    )
    worker = pool_settings(
        server.url,
        namespace,
        redis_username=user,
        redis_password=password,
        lease=1,
        heartbeat_interval=0.2,
        max_lost=1,
        keep_result=60,
    )
    pool = WorkerPool(settings=worker)
    marked = anyio.Event()

    @pool.job()
    async def quick(ctx: JobContext, x: int) -> int:
        if x == 1:
            await marked.wait()  # it ends only once the wait has marked it: on a slow
        await anyio.sleep(0.3)  # host, 0.3 s alone could pass before the mark
        return x

    async with Client.from_url(server.url, namespace, shards=SHARDS) as admin:
        with capture_logs() as logs:
            async with pool.running():
                waited = await admin.enqueue("quick", 1)
                with pytest.raises(TimeoutError, match=r"did not finish within 0\.1 s"):
                    await admin.wait(waited.id, timeout=0.1)  # marks it waited for
                marked.set()
                await wait_until(lambda: any("refused" in e["event"] for e in logs))
                plain = await admin.enqueue("quick", 2)  # the pool runs on
                await wait_until(functools.partial(_state, admin, plain.id, State.COMPLETE))
                # Its outcome was given up: the lease expires and the reaper takes it.
                await wait_until(functools.partial(_state, admin, waited.id, State.DEAD))
        record = await admin.job(waited.id)
        assert record is not None and record.reason == "lost"
    refusals = [e for e in logs if e["event"].startswith("Redis refused to record outcomes")]
    assert len(refusals) == 1 and "can't run this command" in refusals[0]["error"]


async def test_the_producer_cannot_touch_the_dead_set_or_other_functions(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    await admin.enqueue("x")  # loads the library, as a pool would
    await admin.admin.shards[0].redis.zadd(admin.admin.shards[0].keys.dead, {"some-dead-job": 1})
    user, password = make_user(server, "producer", namespace)
    lib = library().name
    with server.client(username=user, password=password) as r:
        refused = [
            ["DEL", admin.admin.shards[0].keys.dead],
            ["UNLINK", admin.admin.shards[0].keys.dead],
            ["SET", admin.admin.shards[0].keys.dead, "x"],
            ["EXPIRE", admin.admin.shards[0].keys.dead, "1"],
            ["ZREM", admin.admin.shards[0].keys.dead, "some-dead-job"],
            [
                "FCALL",
                f"{lib}_delete",
                "1",
                admin.admin.shards[0].keys.prefix,
                "dead",
                "",
                "0",
                "some-dead-job",
            ],
            [
                "FCALL",
                f"{lib}_move",
                "1",
                admin.admin.shards[0].keys.prefix,
                "dead",
                "0",
                "some-dead-job",
            ],
            ["FLUSHALL"],
            ["KEYS", "*"],
            ["GET", Keys("other").names],
            ["DEL", admin.admin.shards[0].keys.pools],
        ]
        for command in refused:
            with pytest.raises(redis.exceptions.NoPermissionError, match=r"(?i)no permissions"):
                r.execute_command(*command)
    assert await admin.admin.shards[0].redis.zcard(admin.admin.shards[0].keys.dead) == 1


async def test_the_read_only_web_shows_pages_and_cannot_retry(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    await admin.enqueue("x")
    await admin.admin.shards[0].redis.sadd(
        admin.admin.shards[0].keys.names, "idle"
    )  # a queue with no job in it
    await admin.admin.shards[0].redis.zadd(admin.admin.shards[0].keys.dead, {"gone": 1})
    web = settings_for(server, "web", namespace)
    app = create_app(web)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        pages = ("/", "/queues", "/dead", "/retry", "/scheduled", "/pools", "/redis", "/metrics")
        for path in (*pages, "/api/queues", "/api/dashboard", "/api/pools", "/healthz"):
            response = await http.get(path, headers={"accept": "text/html"})
            assert response.status_code == 200, (path, response.text[:300])
        response = await http.post("/api/dead/retry", json={"ids": ["gone"]})
        assert response.status_code == 403, response.text
        assert "read-only" in response.json()["error"]
    assert await admin.admin.shards[0].redis.zcard(admin.admin.shards[0].keys.dead) == 1
    # The refused FCALL switched the web's client to EVALSHA, not the admin's.
    assert not app.state.rota.client.admin.shards[0].script_mode.functions
    assert (await admin.enqueue("x")).created
    assert admin.admin.shards[0].script_mode.functions


async def test_the_web_operator_retries_and_deletes(
    server: RedisServer, namespace: str, admin: Client
) -> None:
    first = await admin.enqueue("x")
    second = await admin.enqueue("x")
    for score, job in enumerate((first, second), 1):  # dead, in the shard its id names
        shard = await admin.admin.shard_holding(job.id)
        await shard.redis.lrem(shard.keys.queue("x"), 0, job.id)
        await shard.redis.zadd(shard.keys.dead, {job.id: score})
        await shard.redis.hset(shard.keys.job(job.id), "state", "dead")
    operator = settings_for(server, "web-operator", namespace)
    app = create_app(operator)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        assert (await http.get("/dead")).status_code == 200
        retried = await http.post("/api/dead/retry", json={"ids": [first.id]})
        assert retried.status_code == 200, retried.text
        deleted = await http.post("/api/dead/delete", json={"ids": [second.id]})
        assert deleted.status_code == 200, deleted.text
    assert [await s.redis.zcard(s.keys.dead) for s in admin.admin.shards] == [0] * SHARDS
    assert await _state(admin, first.id, State.QUEUED)
    assert await admin.job(second.id) is None


def test_the_cli_under_the_read_only_role_reads_and_is_told_why_it_cannot_retry(
    server: RedisServer, namespace: str
) -> None:
    keys = Keys(namespace)
    with server.client() as admin:
        admin.hset(keys.job("gone"), mapping={"name": "x", "args": "[]", "state": "dead"})
        admin.zadd(keys.dead, {"gone": 1})
    user, password = make_user(server, "web", namespace)
    env = rota_env(
        ROTA_REDIS_URL=server.url,
        ROTA_NAMESPACE=namespace,
        ROTA_REDIS_USERNAME=user,
        ROTA_REDIS_PASSWORD=password,
    )
    status = run_rota("status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    with server.client() as admin:  # a known name whose queue is empty
        admin.sadd(keys.names, "idle")
    status = run_rota("status", env=env)
    assert status.returncode == 0, status.stderr
    assert "idle" in status.stdout
    refused = run_rota("dead", "retry", "--all", "--yes", env=env)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"rota: redis_username: Redis at {server.url} refused a command")
    assert f"'{user}'" in line and "docs/operations.md" in line and password not in line


def test_the_lines_in_the_docs_are_the_ones_rota_acl_prints() -> None:
    docs = (REPO / "docs" / "operations.md").read_text()
    lib = library().name
    for role in ROLES:
        done = run_rota("acl", role)
        assert done.returncode == 0, done.stderr
        line = done.stdout.strip()
        assert line == setuser(role, f"rota-{role}")
        assert line.replace(lib, "rota_<digest>") in docs, role
    shop = run_rota("acl", "producer", "--namespace", "shop", "--user", "orders")
    assert shop.stdout.startswith("ACL SETUSER orders reset on ><password> resetkeys %R~{shop}:*")
    assert run_rota("acl", "producer", "--namespace", "bad{ns}").returncode == 2


async def test_the_roles_over_four_shards_reach_every_shard(
    server: RedisServer, namespace: str
) -> None:
    """The rules for a namespace over four shards grant each shard's keys: a producer
    enqueues into all four, a pool of the worker role runs every job, and the read-only
    web role reads them; the one-shard rules are refused the other shards."""
    shards = 4

    def settings(role: str, k: int = shards) -> Settings:
        user, password = f"{role}-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
        server.client().execute_command(  # type: ignore[no-untyped-call]
            "ACL", "SETUSER", user, "reset", "on", f">{password}", *rules(role, namespace, k)
        )
        return pool_settings(
            server.url,
            namespace,
            shards=shards,
            redis_username=user,
            redis_password=password,
            keep_result=60,
        )

    pool = WorkerPool(settings=settings("worker"))
    ran: list[int] = []

    # Limited: its parts start at 0, so only the rebalancer's moves under the worker
    # role let the jobs run.
    @pool.job(max_concurrency=2, rate="1000/s")
    async def step(ctx: JobContext, i: int) -> None:
        ran.append(i)

    specs = [JobSpec(name="step", args=(i,)) for i in range(40)]
    async with pool.running(), Client.from_settings(settings("producer")) as producer:
        jobs = await producer.enqueue_many(specs)  # the pool loaded the library first
        assert len({shard_of(j.id, shards) for j in jobs}) == shards
        await wait_until(lambda: len(ran) == 40, within=15)
        assert await producer.wait(jobs[-1].id, timeout=5) is None
    async with Client.from_settings(settings("web")) as web:
        assert (await web.admin.stats())["processed"] == 40
    async with Client.from_settings(settings("web-operator")) as operator:
        await operator.admin.set_limit("step", 3)
        await operator.admin.set_rate("step", "50/s")
        [queue] = await operator.admin.queues(["step"])
        assert (queue.limit, queue.rate) == (3, "50/s")
    async with Client.from_settings(settings("producer", k=1)) as narrow:
        # the rules of one shard: the others are refused
        with pytest.raises(RedisRefused, match=r"^NOPERM "):
            await narrow.enqueue_many(specs)


def test_the_rules_of_several_shards_reach_no_other_namespace(server: RedisServer) -> None:
    """``{app~*}:`` grants the shards of ``app`` and nothing of ``app2``, ``app.x`` or
    ``ap``: asked of Redis itself (ACL DRYRUN), for every role."""
    admin = server.client()
    for role in ROLES:
        user = f"dry-{role}-{uuid.uuid4().hex[:6]}"
        admin.execute_command(  # type: ignore[no-untyped-call]
            "ACL", "SETUSER", user, "reset", "on", ">pw", *rules(role, "app", 4)
        )

        def allowed(*command: str, user: str = user) -> bool:
            reply = admin.execute_command("ACL", "DRYRUN", user, *command)  # type: ignore[no-untyped-call]
            return reply in (b"OK", "OK")

        assert allowed("HGET", "{app~3.1}:job:x", "name"), role
        for other in ("{app2}:job:x", "{app.x}:job:x", "{ap}:job:x", "{app2~1}:job:x"):
            assert not allowed("HGET", other, "name"), (role, other)
