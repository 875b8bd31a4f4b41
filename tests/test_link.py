"""rota.wire.link.Link against real redis-servers: pipelining, errors, cancellation, outages."""

from __future__ import annotations

import asyncio
import enum
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions as rx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rota
from rota import Client, JobContext, WorkerPool
from rota.wire.conn import Conn, RedisPyConn
from rota.wire.link import Arg, Link
from tests.helpers import link_of, pool_settings, wait_until, waiting_on_wake_lists
from tests.redis_server import RedisServer, free_port


class Level(enum.IntEnum):
    HIGH = 2


class Name(enum.StrEnum):
    A = "a"


def _key() -> str:
    return "link:" + uuid.uuid4().hex


def _connections(sync: redis.Redis) -> int:
    return int(sync.info("stats")["total_connections_received"])


async def test_concurrent_callers_get_their_own_replies(redis_url: str) -> None:
    base = _key()
    async with Link.from_url(redis_url) as link:
        counts = await asyncio.gather(
            *(link.execute_command("INCRBY", f"{base}:{i}", i) for i in range(1000))
        )
        assert counts == list(range(1000))
        values = await asyncio.gather(
            *(link.execute_command("GET", f"{base}:{i}") for i in range(1000))
        )
        assert values == [str(i).encode() for i in range(1000)]
        assert await link.execute_command("DEL", *(f"{base}:{i}" for i in range(1000))) == 1000


async def test_replies_keep_their_types(redis_url: str) -> None:
    k = _key()
    async with Link.from_url(redis_url) as link:
        assert await link.execute_command("PING") == b"PONG"
        assert await link.execute_command("SET", k, 0.1) == b"OK"
        assert await link.execute_command("GET", k) == b"0.1"
        assert await link.execute_command("GET", k + ":none") is None
        assert await link.execute_command("RPUSH", k + ":l", "a", b"b", 3, -4.5) == 4
        assert await link.execute_command("LRANGE", k + ":l", 0, -1) == [b"a", b"b", b"3", b"-4.5"]
        assert await link.execute_command("LRANGE", k + ":none", 0, -1) == []
        big = bytes(range(256)) * 400
        assert await link.execute_command("SET", k + ":big", big) == b"OK"
        assert await link.execute_command("GET", k + ":big") == big
        odd = [Level.HIGH, Name.A, bytearray(b"ba"), memoryview(b"mv"), 2**70, -0.0]
        assert await link.execute_command("RPUSH", k + ":odd", *odd) == 6
        assert await link.execute_command("LRANGE", k + ":odd", 0, -1) == [
            b"2",
            b"a",
            b"ba",
            b"mv",
            str(2**70).encode(),
            b"-0.0",
        ]
        with pytest.raises(rx.DataError, match="Invalid input of type: 'bool'"):
            await link.execute_command("SET", k, True)
        with pytest.raises(rx.DataError, match="Invalid input of type: 'NoneType'"):
            await link.execute_command("SET", k, None)
        with pytest.raises(rx.DataError, match="a command needs a name"):
            await link.execute_command()
        assert await link.execute_command("GET", k) == b"0.1"  # nothing was sent


async def test_error_replies_in_the_middle_of_a_pipeline(redis_url: str) -> None:
    k = _key()
    async with Link.from_url(redis_url) as link:
        replies = await link.execute_many(
            [["SET", k, "x"], ["INCR", k], ["GET", k], ["NOSUCHCOMMAND"], ["ECHO", "end"]]
        )
        assert replies[0] == b"OK"
        assert isinstance(replies[1], rx.ResponseError)
        assert str(replies[1]) == "value is not an integer or out of range"
        assert replies[2] == b"x"
        assert isinstance(replies[3], rx.ResponseError)
        assert replies[4] == b"end"
        assert await link.execute_many([]) == []

        async def one(i: int) -> Any:
            try:
                return await link.execute_command("INCR" if i % 3 else "LPUSH", f"{k}:{i}")
            except rx.ResponseError as exc:
                return exc

        results = await asyncio.gather(*(one(i) for i in range(300)))
        for i, result in enumerate(results):
            if i % 3:
                assert result == 1
            else:
                assert isinstance(result, rx.ResponseError)
                assert "wrong number of arguments" in str(result)
        assert await link.execute_command("ECHO", "still in step") == b"still in step"


async def test_errors_are_those_of_redis_py(redis_url: str) -> None:
    k = _key()
    calls: list[tuple[Any, ...]] = [
        ("EVALSHA", "0" * 40, 0),
        ("FCALL", "no_such_function", 0),
        ("NOSUCHCOMMAND", "a"),
        ("HGET", k, "f"),
        ("INCR", k),
    ]
    reference = redis.asyncio.Redis.from_url(redis_url)
    await reference.hset(k, "f", "v")
    outcomes: list[tuple[Any, ...]] = []
    async with Link.from_url(redis_url) as link:
        for call in calls:
            pair: list[Any] = []
            for conn in (link, reference):
                try:
                    pair.append(await conn.execute_command(*call))
                except rx.RedisError as exc:
                    pair.append((type(exc), str(exc)))
            outcomes.append(tuple(pair))
    await reference.aclose()
    assert [mine for mine, _ in outcomes] == [theirs for _, theirs in outcomes]
    assert [mine[0] for mine, _ in outcomes if isinstance(mine, tuple)] == [
        rx.NoScriptError,
        rx.ResponseError,
        rx.ResponseError,
        rx.ResponseError,
    ]


@pytest.mark.parametrize("kind", ["link", "redis-py"])
async def test_execute_many_of_either_conn(redis_url: str, kind: str) -> None:
    """Both kinds of :class:`rota.wire.conn.Conn` answer a batch alike: replies in
    order, an error reply in its place, nothing raised."""
    k = _key()
    async with redis.asyncio.Redis.from_url(redis_url) as r, Link.from_url(redis_url) as link:
        conn: Conn = link if kind == "link" else RedisPyConn(r)
        commands: list[tuple[Arg, ...]] = [("SET", k, "v"), ("INCR", k), ("EVALSHA", "0" * 40, 0)]
        replies = await conn.execute_many(commands)
        assert replies[0] in (b"OK", True)  # redis-py shapes SET's reply
        assert isinstance(replies[1], rx.ResponseError)
        assert isinstance(replies[2], rx.NoScriptError)
        assert await conn.execute_many([]) == []
        assert (await conn.client_id() > 0) == (kind == "link")


async def test_noscript_and_function_errors(redis_url: str) -> None:
    async with Link.from_url(redis_url) as link:
        with pytest.raises(rx.NoScriptError, match="No matching script"):
            await link.execute_command("EVALSHA", "0" * 40, 0)
        sha = await link.execute_command("SCRIPT", "LOAD", "return ARGV[1]")
        assert await link.execute_command("EVALSHA", sha, 0, b"\x00hi") == b"\x00hi"
        with pytest.raises(rx.ResponseError, match=r"^Function not found$"):
            await link.execute_command("FCALL", "rota_no_such_function", 0)
        k = _key()
        await link.execute_command("LPUSH", k, "x")
        with pytest.raises(rx.ResponseError, match=r"^WRONGTYPE "):
            await link.execute_command("GET", k)


def _written(link: Link, n: int) -> bool:
    """Whether ``n`` commands are out of the link's buffers, waiting for their replies."""
    conn = link._conn
    if conn is None or conn.transport is None:
        return False
    return len(conn.pending) >= n and conn.transport.get_write_buffer_size() == 0


def _opening() -> bool:
    """Whether a link of this loop is still opening a connection."""
    return any(
        getattr(t.get_coro(), "__qualname__", "") == "Link._open" for t in asyncio.all_tasks()
    )


async def test_a_cancelled_caller_does_not_desynchronise(
    fresh_redis_server: RedisServer,
) -> None:
    sync = fresh_redis_server.client()
    async with Link.from_url(fresh_redis_server.url) as link:
        assert await link.execute_command("PING") == b"PONG"
        sync.execute_command("CLIENT", "PAUSE", 400, "ALL")  # type: ignore[no-untyped-call]  # replies wait
        tasks = [asyncio.create_task(link.execute_command("ECHO", f"m{i}")) for i in range(100)]
        await wait_until(lambda: _written(link, 100))  # sent: only the replies wait
        assert not any(t.done() for t in tasks)
        for task in tasks[::2]:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for i, result in enumerate(results):
            if i % 2:
                assert result == f"m{i}".encode()
            else:
                assert isinstance(result, asyncio.CancelledError)
        assert await link.execute_command("ECHO", "after") == b"after"
        # Callers cancelled while the link connects, and by timeouts mid-flight.
    async with Link.from_url(fresh_redis_server.url) as link:
        tasks = [asyncio.create_task(link.execute_command("ECHO", f"c{i}")) for i in range(10)]
        await asyncio.sleep(0)
        for task in tasks[:5]:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert results[5:] == [f"c{i}".encode() for i in range(5, 10)]
        for i in range(200):
            try:
                async with asyncio.timeout(0.0001 * (i % 5)):
                    await link.execute_command("ECHO", f"t{i}")
            except TimeoutError:
                pass
            assert await link.execute_command("ECHO", f"u{i}") == f"u{i}".encode()
    sync.close()


async def test_a_killed_server_fails_pending_calls_then_the_link_reconnects(
    fresh_redis_server: RedisServer,
) -> None:
    server = fresh_redis_server
    sync = server.client()
    async with Link.from_url(server.url) as link:
        assert await link.execute_command("SET", "k", "before") == b"OK"
        sync.execute_command("CLIENT", "PAUSE", 5000, "ALL")  # type: ignore[no-untyped-call]
        sync.close()
        pending = [asyncio.create_task(link.execute_command("INCR", "n")) for _ in range(10)]
        await asyncio.sleep(0.1)
        server.kill()
        results = await asyncio.gather(*pending, return_exceptions=True)
        assert all(isinstance(r, rx.ConnectionError) for r in results), results
        # refused while it is down
        with pytest.raises(rx.ConnectionError, match="Error connecting to Redis at "):
            await link.execute_command("PING")
        server.start()
        sync = server.client()
        before = _connections(sync)
        assert await asyncio.gather(*(link.execute_command("INCR", "n") for _ in range(50))) == (
            list(range(1, 51))
        )
        assert _connections(sync) == before + 1  # the 50 callers shared one connect
        assert await link.execute_command("GET", "k") is None  # no persistence
    sync.close()


async def test_a_server_that_stops_answering_times_out_and_the_link_recovers(
    fresh_redis_server: RedisServer,
) -> None:
    sync = fresh_redis_server.client()
    async with Link.from_url(fresh_redis_server.url, socket_timeout=0.5) as link:
        assert await link.execute_command("PING") == b"PONG"
        paused = time.monotonic()
        sync.execute_command("CLIENT", "PAUSE", 3000, "ALL")  # type: ignore[no-untyped-call]
        calls = [asyncio.create_task(link.execute_command("ECHO", i)) for i in range(10)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert time.monotonic() - paused < 2.9  # timed out before the 3 s pause ended
        assert all(isinstance(r, rx.TimeoutError) for r in results), results
        while True:  # the pause lasts 3 s; every try before its end times out
            try:
                assert await link.execute_command("ECHO", "back") == b"back"
                break
            except rx.TimeoutError:
                assert time.monotonic() - paused < 10
        assert time.monotonic() - paused > 2.9
    sync.close()


async def test_blocking_pops_outlast_the_socket_timeout(redis_url: str) -> None:
    k = _key()
    sync = redis.Redis.from_url(redis_url)
    async with Link.from_url(redis_url, socket_timeout=0.5) as link:
        started = time.monotonic()
        assert await link.execute_command("BLPOP", k, 1) is None
        assert 0.9 < time.monotonic() - started < 10  # not cut at the 0.5 s socket timeout
        asyncio.get_running_loop().call_later(0.7, sync.rpush, k, b"item")
        assert await link.execute_command("BLPOP", k, 2) == [k.encode(), b"item"]
        started = time.monotonic()
        reply = await link.execute_command("XREAD", "BLOCK", 800, "STREAMS", k + "s", "$", block=1)
        assert reply is None
        assert time.monotonic() - started > 0.7
        assert await link.execute_command("PING") == b"PONG"
    sync.close()


async def test_password_and_acl_users(fresh_redis_server: RedisServer) -> None:
    port = fresh_redis_server.port
    sync = fresh_redis_server.client()
    sync.execute_command("ACL", "SETUSER", "alice", "on", ">wonder", "~*", "+@all")  # type: ignore[no-untyped-call]
    sync.config_set("requirepass", "s3cret")
    async with Link.from_url(f"redis://:s3cret@127.0.0.1:{port}/0") as link:
        assert await link.execute_command("ACL", "WHOAMI") == b"default"
    async with Link.from_url(f"redis://alice:wonder@127.0.0.1:{port}/0") as link:
        assert await link.execute_command("ACL", "WHOAMI") == b"alice"
    async with Link.from_url(f"redis://:wrong@127.0.0.1:{port}/0") as link:
        with pytest.raises(rx.AuthenticationError, match="invalid username-password pair"):
            await link.execute_command("PING")
    async with Link.from_url(f"redis://127.0.0.1:{port}/0") as link:
        with pytest.raises(rx.AuthenticationError, match="Authentication required"):
            await link.execute_command("PING")
    sync.close()


async def test_databases_and_unix_sockets() -> None:
    server = RedisServer(start=False)
    sock = server.dir / "redis.sock"
    server.extra_args = ["--unixsocket", str(sock), "--unixsocketperm", "700"]
    try:
        server.start()
        async with Link.from_url(f"redis://127.0.0.1:{server.port}/5", client_name="tcp") as link:
            assert await link.execute_command("SET", "where", "five") == b"OK"
            assert await link.execute_command("CLIENT", "GETNAME") == b"tcp"
        async with Link.from_url(f"unix://{sock}?db=3") as link:
            assert await link.execute_command("SET", "where", "three") == b"OK"
        async with Link.from_url(f"unix://{sock}") as link:
            assert await link.execute_command("GET", "where") is None
        for db, value in ((5, b"five"), (3, b"three"), (0, None)):
            sync = redis.Redis(port=server.port, db=db)
            assert sync.get("where") == value
            sync.close()
    finally:
        server.close()


def test_tls(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    args += ["--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]
    with RedisServer(args) as server:
        assert server.running

        async def main() -> None:
            url = f"rediss://127.0.0.1:{tls_port}/2?ssl_cert_reqs=required&ssl_ca_certs={cert}"
            async with Link.from_url(url) as link:
                assert await link.execute_command("SET", "tls", b"\x00yes") == b"OK"
                assert await asyncio.gather(
                    *(link.execute_command("ECHO", i) for i in range(100))
                ) == [str(i).encode() for i in range(100)]
            async with Link.from_url(f"rediss://127.0.0.1:{tls_port}/0") as link:
                with pytest.raises(rx.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                    await link.execute_command("PING")

        asyncio.run(main())
        sync = redis.Redis(port=server.port, db=2)
        assert sync.get("tls") == b"\x00yes"
        sync.close()


async def test_aclose_fails_pending_calls_and_may_be_called_twice(
    fresh_redis_server: RedisServer,
) -> None:
    sync = fresh_redis_server.client()
    link = Link.from_url(fresh_redis_server.url)
    assert await link.execute_command("PING") == b"PONG"
    sync.execute_command("CLIENT", "PAUSE", 300, "ALL")  # type: ignore[no-untyped-call]
    pending = asyncio.create_task(link.execute_command("PING"))
    await asyncio.sleep(0.05)
    await link.aclose()
    with pytest.raises(rx.ConnectionError, match="Redis link closed"):
        await pending
    await link.aclose()
    assert await link.execute_command("ECHO", "again") == b"again"  # connects anew
    await link.aclose()
    sync.close()


def test_a_link_follows_the_event_loop_it_is_used_on(redis_url: str) -> None:
    link = Link.from_url(redis_url)
    k = _key()

    async def incr_and_close() -> Any:
        try:
            return await link.execute_command("INCR", k)
        finally:
            await link.aclose()

    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(link.execute_command("INCR", k)) == 1
        assert asyncio.run(incr_and_close()) == 2  # another loop: reconnects
        first.run_until_complete(asyncio.sleep(0.01))  # the old connection closes
    finally:
        first.close()
    assert asyncio.run(incr_and_close()) == 3


def test_writers_wait_while_the_server_reads_nothing(fresh_redis_server: RedisServer) -> None:
    big = b"x" * (1 << 20)

    async def main() -> None:
        async with Link.from_url(fresh_redis_server.url, socket_timeout=30) as link:
            assert await link.execute_command("PING") == b"PONG"
            assert fresh_redis_server.pid is not None
            os.kill(fresh_redis_server.pid, signal.SIGSTOP)
            try:
                calls = [
                    asyncio.create_task(link.execute_command("SET", f"big{i}", big))
                    for i in range(40)
                ]
                await asyncio.sleep(0.5)
                conn = link._conn
                assert conn is not None and conn.transport is not None
                assert conn.writable is not None  # over the high-water mark
                assert conn.transport.get_write_buffer_size() < 4 << 20  # not 40 MiB
            finally:
                os.kill(fresh_redis_server.pid, signal.SIGCONT)
            assert await asyncio.gather(*calls) == [b"OK"] * 40

    asyncio.run(main())


_binary = st.binary(max_size=300)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(_binary, _binary), min_size=1, max_size=20))
def test_any_bytes_round_trip(redis_server: RedisServer, pairs: list[tuple[bytes, bytes]]) -> None:
    prefix = _key().encode()

    async def main() -> tuple[list[Any], list[Any]]:
        async with Link.from_url(redis_server.url) as link:
            await asyncio.gather(*(link.execute_command("SET", prefix + k, v) for k, v in pairs))
            one_by_one = await asyncio.gather(
                *(link.execute_command("GET", prefix + k) for k, _ in pairs)
            )
            many = await link.execute_many([("GET", prefix + k) for k, _ in pairs])
            return one_by_one, many

    expected = dict(pairs)
    one_by_one, many = asyncio.run(main())
    assert one_by_one == many == [expected[k] for k, _ in pairs]


async def test_the_client_enqueues_through_its_link(fresh_redis_server: RedisServer) -> None:
    server = fresh_redis_server
    sync = server.client()
    sync.config_set("requirepass", "pw")
    url = f"redis://:pw@127.0.0.1:{server.port}/4"
    async with Client.from_url(url, "ns") as client:
        link = link_of(client)
        assert link is not None
        assert (link.port, link.db, link.password, link.socket_timeout) == (
            server.port,
            4,
            "pw",
            15,
        )
        job = await client.enqueue("work", 1)
        assert link._conn is not None  # the enqueue went through the link
        assert (await client.job(job.id)) is not None
        sync.execute_command("AUTH", "pw")  # type: ignore[no-untyped-call]
        sync.execute_command("FUNCTION", "FLUSH")  # type: ignore[no-untyped-call]  # loaded again through the link
        sync.execute_command("SCRIPT", "FLUSH")  # type: ignore[no-untyped-call]
        again = await client.enqueue("work", 2, unique="u")
        assert again.created
        assert (await client.enqueue("work", 3, unique="u")) == rota.Enqueued(
            again.id, "work", False
        )
        sync.execute_command("FUNCTION", "FLUSH")  # type: ignore[no-untyped-call]
        sync.execute_command("SCRIPT", "FLUSH")  # type: ignore[no-untyped-call]
        specs = [rota.JobSpec(name="many", args=(i,)) for i in range(2500)]
        jobs = await client.enqueue_many(specs)  # three batch calls, loaded again
        assert len({j.id for j in jobs}) == 2500
        assert all(j.created for j in jobs)
        db4 = redis.Redis(port=server.port, db=4, password="pw")
        assert db4.llen("{ns}:queue:many") == 2500
        db4.close()
    assert link._conn is None  # closed with the client
    sync.close()


async def test_a_client_without_a_link_uses_redis_py(redis_url: str, namespace: str) -> None:
    class Custom(redis.asyncio.Connection):
        pass

    pool = redis.asyncio.ConnectionPool.from_url(redis_url, connection_class=Custom)
    async with Client(redis.asyncio.Redis(connection_pool=pool), namespace) as client:
        assert link_of(client) is None
        job = await client.enqueue("work", x=1)
        record = await client.job(job.id)
        assert record is not None
        assert record.name == "work"
    await pool.aclose()


async def test_a_pool_without_a_link_fetches_and_finishes_through_redis_py(
    redis_url: str, namespace: str
) -> None:
    """Where no Link can be made, the fetcher's wait and fetch, the acker's finishes and
    the parents' results go through redis-py (rota.wire.conn.RedisPyConn)."""

    class Custom(redis.asyncio.Connection):
        pass

    pool_of_connections = redis.asyncio.ConnectionPool.from_url(redis_url, connection_class=Custom)
    got: list[Any] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def step(ctx: JobContext, n: int) -> int:
        got.append((n, dict(ctx.parent_results)))
        return n

    async with Client(
        redis.asyncio.Redis(connection_pool=pool_of_connections), namespace
    ) as client:
        assert link_of(client) is None
        async with pool.running(client=client):
            await wait_until(lambda: waiting_on_wake_lists(redis_url))  # the fetcher waits
            first = await client.enqueue("step", 1)
            jobs = await client.enqueue_many(
                [rota.JobSpec(name="step", args=(n,)) for n in range(2, 60)]
            )
            last = await client.enqueue("step", 60, after=[first.id])
            assert await client.wait(last.id, timeout=10) == 60
            await wait_until(lambda: len(got) == 60, within=10)
    assert sorted(n for n, _ in got) == list(range(1, 61))
    assert (60, {first.id: 1}) in got
    assert all(j.created for j in jobs)
    await pool_of_connections.aclose()


async def test_a_single_connection_client_sends_a_batch_on_its_own_connection(
    redis_url: str,
) -> None:
    """A durable enqueue WAITs on one connection for the writes made on it: the batch
    must not go through redis-py's pipeline, which takes another from the pool."""
    async with redis.asyncio.Redis.from_url(redis_url) as r, r.client() as one:
        own = await one.client_id()
        replies = await RedisPyConn(one).execute_many([("CLIENT", "ID"), ("CLIENT", "ID")])
        assert replies == [own, own]


async def test_closing_a_link_while_it_connects_leaves_no_connection_behind(
    redis_server: RedisServer,
) -> None:
    """A caller cancelled while its link opens a connection (a pool stopping at its
    start), then the link closed: the connection being opened is closed too, not left
    open once it lands (an unclosed socket, one more client on the server)."""
    with redis_server.client() as sync:
        before = len(sync.client_list())
        for _ in range(20):
            link = Link.from_url(redis_server.url)
            call = asyncio.ensure_future(link.execute_command("PING"))
            await asyncio.sleep(0)  # the opening has started, shielded from the caller
            call.cancel()
            await link.aclose()
            assert link._conn is None
        await wait_until(lambda: not _opening())  # an opening left behind has landed
        assert len(sync.client_list()) == before
