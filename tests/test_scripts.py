"""The Lua reaches Redis as a function library, and as plain scripts where it cannot.

Calls go by FCALL of one library loaded once; a library lost with a restart or a
FUNCTION FLUSH is loaded again; a server without functions, or a user refused them,
gets the same code by EVALSHA, and that path survives a SCRIPT FLUSH as before. Each
client keeps its own mode: a refusal by one server does not switch calls to another.
"""

from __future__ import annotations

import redis

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol import scripts
from rota.protocol.render import library
from rota.protocol.scripts import ScriptMode
from tests.helpers import pool_settings
from tests.redis_server import RedisServer

NAMESPACE = "lib"


def _calls(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def _libraries(r: redis.Redis) -> list[str]:
    """Names of the loaded libraries (FUNCTION LIST answers flat field, value lists)."""
    return [
        dict(zip(lib[::2], lib[1::2], strict=True))[b"library_name"].decode()
        for lib in r.function_list()
    ]


async def _round_trip(url: str, *, functions: bool = True) -> list[ScriptMode]:
    """Jobs through the main scripts: enqueue, enqueue_many, fetch, finish, wait. The
    modes the producer and the pool ended with; ``functions=False``: both start with
    EVALSHA (the pool then shares the producer's client)."""
    pool = WorkerPool(settings=pool_settings(url, NAMESPACE, keep_result=60))

    @pool.job
    async def add(ctx: JobContext, a: int, b: int) -> int:
        return a + b

    async with Client.from_url(url, NAMESPACE) as client:
        client.admin.shards[0].script_mode.use_functions(functions)
        async with pool.running(client=None if functions else client) as rt:
            job = await client.enqueue("add", 1, 2)
            more = await client.enqueue_many([JobSpec(name="add", args=(i, i)) for i in range(3)])
            assert await client.wait(job.id, timeout=5) == 3
            assert [await client.wait(j.id, timeout=5) for j in more] == [0, 2, 4]
    return [client.admin.shards[0].script_mode, rt.script_mode]


async def test_calls_go_by_fcall_of_one_library(fresh_redis_server: RedisServer) -> None:
    r = fresh_redis_server.client()
    modes = await _round_trip(fresh_redis_server.url)
    assert [m.functions for m in modes] == [True, True]
    assert _libraries(r) == [library().name]
    calls = _calls(r)
    assert calls["fcall"] > 5
    assert "evalsha" not in calls
    assert "eval" not in calls


async def test_a_lost_library_is_loaded_again(fresh_redis_server: RedisServer) -> None:
    r = fresh_redis_server.client()
    await _round_trip(fresh_redis_server.url)
    r.function_flush()
    async with Client.from_url(fresh_redis_server.url, NAMESPACE) as client:
        assert (await client.enqueue("x")).created  # one call
        r.function_flush()
        jobs = await client.enqueue_many([JobSpec(name="x")] * 3)  # one pipeline
        assert all(job.created for job in jobs)
    assert _libraries(r) == [library().name]
    assert client.admin.shards[0].script_mode.functions


def test_library_and_function_names_carry_a_digest_of_the_code(
    redis_sync: redis.Redis,
) -> None:
    lib = library()
    assert lib.name.startswith("rota_")
    assert lib.function("fetch") == lib.name + "_fetch"
    assert lib.code.startswith(f"#!lua name={lib.name}\n")
    # another version: other code, so another name; both load side by side
    other = lib.code.replace(lib.name, "rota_0ther").replace("WAKE_CAP = 10", "WAKE_CAP = 9")
    redis_sync.function_load(lib.code, replace=True)
    redis_sync.function_load(other, replace=True)
    assert {lib.name, "rota_0ther"} <= set(_libraries(redis_sync))
    redis_sync.function_delete("rota_0ther")


NO_FUNCTIONS = ["--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""]


async def test_a_server_without_functions_gets_the_scripts() -> None:
    with RedisServer(NO_FUNCTIONS) as server:
        modes = await _round_trip(server.url)
        assert [m.functions for m in modes] == [False, False]
        calls = _calls(server.client())
    assert calls["evalsha"] > 5
    assert "fcall" not in calls


async def test_a_user_refused_functions_gets_the_scripts(fresh_redis_server: RedisServer) -> None:
    r = fresh_redis_server.client()
    r.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                  commands=["+@all", "-function"])  # fmt: skip
    url = f"redis://app:pw@127.0.0.1:{fresh_redis_server.port}/0"
    modes = await _round_trip(url)  # FCALL finds no function, FUNCTION LOAD is refused
    assert [m.functions for m in modes] == [False, False]
    assert _libraries(r) == []


async def test_the_scripts_survive_a_script_flush(fresh_redis_server: RedisServer) -> None:
    r = fresh_redis_server.client()
    await _round_trip(fresh_redis_server.url, functions=False)
    r.script_flush()
    await _round_trip(fresh_redis_server.url, functions=False)
    async with Client.from_url(fresh_redis_server.url, NAMESPACE) as client:
        client.admin.shards[0].script_mode.use_functions(False)
        r.script_flush()
        jobs = await client.enqueue_many([JobSpec(name="x")] * 3)
        assert all(job.created for job in jobs)
    calls = _calls(r)
    assert calls["evalsha"] > 5
    assert "fcall" not in calls
    assert _libraries(r) == []


async def test_each_client_keeps_the_mode_of_its_own_server(
    fresh_redis_server: RedisServer,
) -> None:
    """One process, two servers: the server without functions gets EVALSHA from its
    client, and the other keeps getting FCALL from its own, before the refusal and after
    it, and from a pool started later."""
    normal = fresh_redis_server
    with RedisServer(NO_FUNCTIONS) as bare:
        async with (
            Client.from_url(bare.url, NAMESPACE) as on_bare,
            Client.from_url(normal.url, NAMESPACE) as on_normal,
        ):
            assert (await on_normal.enqueue("x")).created
            assert (await on_bare.enqueue("x")).created  # refused FCALL: EVALSHA from now on
            assert (await on_normal.enqueue("x")).created
            assert [await c.abort("none") for c in (on_bare, on_normal)] == ["missing"] * 2
            assert not on_bare.admin.shards[0].script_mode.functions
            assert on_normal.admin.shards[0].script_mode.functions
            modes = await _round_trip(normal.url)  # a pool after the refusal
            bare_calls = _calls(bare.client())
    assert [m.functions for m in modes] == [True, True]
    calls = _calls(normal.client())
    assert calls["fcall"] > 5
    assert "evalsha" not in calls
    assert bare_calls["evalsha"] >= 2
    assert "fcall" not in bare_calls


def test_each_script_runs_on_its_own(redis_sync: redis.Redis) -> None:
    """A script's text is complete without the library (other languages EVAL it)."""
    for name in scripts.SCRIPT_NAMES:
        source = scripts.script(name).source
        assert redis_sync.script_load(source) == scripts.script(name).sha
    reply = redis_sync.eval(scripts.script("wait").source, 1, "{solo}:", "no-such-job")
    assert reply == []
