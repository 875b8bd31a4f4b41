"""Durable enqueue: an enqueue returns once replicas hold the jobs (``WAIT``), and
raises :class:`rota.NotReplicated` when they do not acknowledge in time."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from rota import Client, JobSpec, NotReplicated
from tests.redis_server import RedisServer


@pytest.fixture
def replica(fresh_redis_server: RedisServer) -> Iterator[RedisServer]:
    server = RedisServer(["--replicaof", "127.0.0.1", str(fresh_redis_server.port)])
    try:
        deadline = time.monotonic() + 10
        with server.client() as r:
            while r.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not sync"
                time.sleep(0.05)
        yield server
    finally:
        server.close()


async def test_a_durable_enqueue_returns_once_the_replica_holds_the_job(
    fresh_redis_server: RedisServer, replica: RedisServer, namespace: str
) -> None:
    async with Client.from_url(fresh_redis_server.url, namespace, durable=1) as client:
        one = await client.enqueue("work", n=1)
        many = await client.enqueue_many([JobSpec(name="work", kwargs={"n": i}) for i in range(3)])
        plain = await client.enqueue("work", n=9, durable=False)
    with replica.client() as r:  # already there when the enqueue returned
        for job in (one, *many):
            assert r.hget("{" + namespace + "}:job:" + job.id, "name") == b"work"
    assert plain.created


async def test_without_replicas_a_durable_enqueue_raises_and_names_what_was_written(
    fresh_redis_server: RedisServer, namespace: str
) -> None:
    async with Client.from_url(fresh_redis_server.url, namespace, durable_timeout=0.1) as client:
        started = time.monotonic()
        with pytest.raises(NotReplicated, match="0 of 1 replica") as refused:
            await client.enqueue("work", n=1, durable=True)
        assert time.monotonic() - started < 5
        (job,) = refused.value.jobs
        assert (refused.value.acked, refused.value.wanted) == (0, 1)
        # Written on the primary all the same; enqueued again by id, nothing doubles.
        assert (await client.job(job.id)) is not None
        again = await client.enqueue("work", n=1, job_id=job.id)
        assert not again.created
        # The Link of the hot path is not held up by WAIT.
        assert (await client.enqueue("work", n=2)).created


async def test_a_durable_batch_waits_for_its_own_writes(
    fresh_redis_server: RedisServer, replica: RedisServer, namespace: str
) -> None:
    """A replica that acknowledges nothing (stopped): a durable batch of several calls
    raises and names every job it wrote. (That the batch and the WAIT share one
    connection is tested in test_link.py.)"""
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)  # the replica acknowledges nothing from now on
    try:
        async with Client.from_url(
            fresh_redis_server.url, namespace, durable=1, durable_timeout=0.2
        ) as client:
            specs = [JobSpec(name="work", kwargs={"n": i}) for i in range(120)]
            with pytest.raises(NotReplicated, match="0 of 1 replica") as refused:
                await client.enqueue_many(specs)
            assert len(refused.value.jobs) == 120
    finally:
        os.kill(replica.pid, signal.SIGCONT)


async def test_a_socket_timeout_within_durable_timeout_is_refused_before_any_write(
    fresh_redis_server: RedisServer, namespace: str
) -> None:
    """Without the check, a WAIT that takes its whole time ended as a TimeoutError (a lost
    connection) instead of NotReplicated, after writing the job."""
    async with Client.from_url(
        fresh_redis_server.url, namespace, durable_timeout=0.5, socket_timeout=0.5
    ) as client:
        with pytest.raises(ValueError, match=r"durable_timeout \(0.5 s\) must be below"):
            await client.enqueue("work", n=1, durable=True)
        assert await client.admin.shards[0].redis.dbsize() == 0
    async with Client.from_url(
        fresh_redis_server.url, namespace, durable_timeout=0.2, socket_timeout=1
    ) as client:
        with pytest.raises(
            NotReplicated, match=r"acknowledged within 0\.2 s: a failover now may lose them"
        ):
            await client.enqueue("work", n=1, durable=True)


async def test_a_durable_enqueue_sent_again_waits_for_the_first_write_too(
    fresh_redis_server: RedisServer, replica: RedisServer, namespace: str
) -> None:
    """An enqueue sent again after its connection broke between the write and the WAIT
    finds its job written and writes nothing: the WAIT of the new connection, which
    covers that connection's own writes only, must still cover the first write (here
    made by a plain enqueue while the replica acknowledges nothing)."""
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        async with Client.from_url(
            fresh_redis_server.url, namespace, durable=1, durable_timeout=0.2
        ) as client:
            first = await client.enqueue("work", n=1, job_id="sent-twice", durable=False)
            assert first.created
            with pytest.raises(NotReplicated, match="0 of 1 replica"):
                await client.enqueue("work", n=1, job_id="sent-twice")
    finally:
        os.kill(replica.pid, signal.SIGCONT)
