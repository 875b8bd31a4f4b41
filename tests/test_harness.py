"""The private redis-server harness behaves as the other tests expect."""

from __future__ import annotations

import redis

from tests.redis_server import DEFAULT_REDIS_PORT, RedisServer


def config_value(client: redis.Redis, name: str) -> str:
    """CONFIG GET one parameter as text (redis-py may answer str or bytes)."""
    reply = client.config_get(name)
    items = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in reply.items()
    }
    return str(items[name])


def test_server_answers_ping(redis_sync: redis.Redis) -> None:
    assert redis_sync.ping() is True


def test_server_is_private(redis_server: RedisServer) -> None:
    assert redis_server.port != DEFAULT_REDIS_PORT
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.pid is not None
    assert redis_server.running


def test_persistence_disabled(redis_sync: redis.Redis) -> None:
    assert config_value(redis_sync, "save") == ""
    assert config_value(redis_sync, "appendonly") == "no"


def test_stop_start_keeps_port(fresh_redis_server: RedisServer) -> None:
    server = fresh_redis_server
    port = server.port
    with server.client() as client:
        client.set(b"k", b"v")
    first_pid = server.pid

    server.stop()
    assert not server.running
    assert server.pid is None

    server.start()
    assert server.port == port
    assert server.pid != first_pid
    with server.client() as client:
        assert client.ping() is True
        # save "" and appendonly no: nothing survives a restart.
        assert client.get(b"k") is None


def test_kill_then_start(fresh_redis_server: RedisServer) -> None:
    server = fresh_redis_server
    port = server.port
    server.kill()
    assert not server.running

    server.start()
    assert server.port == port
    with server.client() as client:
        assert client.ping() is True


def test_restart(fresh_redis_server: RedisServer) -> None:
    server = fresh_redis_server
    port = server.port
    server.restart()
    assert server.port == port
    with server.client() as client:
        assert client.ping() is True


def test_aof_extra_args_survive_kill() -> None:
    with RedisServer(["--appendonly", "yes", "--appendfsync", "always"]) as server:
        with server.client() as client:
            assert config_value(client, "appendonly") == "yes"
            client.set(b"durable", b"1")
        server.kill()
        server.start()
        with server.client() as client:
            assert client.get(b"durable") == b"1"
