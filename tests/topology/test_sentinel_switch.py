"""Sentinel: a planned failover, whose old primary is still up, moves pools and producers
at the sentinels' word.

After ``SENTINEL FAILOVER`` the old primary keeps serving the connections it has until a
sentinel converts it to a replica (it looks every ten seconds), and the conversion
discards what it took meanwhile. Here the old primary is stopped (SIGSTOP) the moment
the sentinels announce the new one, so that anything still talking to it hangs: a pool
or a producer that waited for its connections to break, or asked a sentinel that had not
heard yet, would not reach the new primary before its socket timeout (15 s). Both must
work on the new primary while the old one is still stopped.
"""

from __future__ import annotations

import os
import signal
import time

import anyio
import pytest
import redis
import redis.asyncio

from rota import Client
from tests.chaos.harness import Fleet, poll
from tests.redis_server import RedisServer
from tests.topology_servers import SERVICE, Sentinel, SentinelGroup, sentinel_binary

pytestmark = pytest.mark.topology

#: How long the old primary stays stopped: under the socket timeout (15 s) by a margin.
STOPPED_FOR = 8.0


@pytest.mark.timeout(120)
def test_a_planned_failover_moves_pools_and_producers_at_the_announcement(
    sentinel_group: SentinelGroup, fleet: Fleet, namespace: str
) -> None:
    group = sentinel_group
    old = group.primary()
    new = next(s for s in group.servers if s is not old)
    fleet.start(group.url, namespace, concurrency=5)
    with old.client(socket_timeout=2) as r:
        poll(
            lambda: r.zcard("{" + namespace + "}:pools") == 1,
            within=30,
            what="the pool started",
            details=fleet.tails,
        )

    async def scenario() -> tuple[str, str]:
        async with (
            Client.from_url(group.url, namespace) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(client.follow_primary)
            before = await client.enqueue("work", 1)  # the client talks to the old primary
            sentinel = redis.asyncio.Redis(port=group.sentinels[0].port)
            pubsub = sentinel.pubsub(ignore_subscribe_messages=True)
            await pubsub.subscribe("+switch-master")
            await anyio.to_thread.run_sync(_failover, group)
            with anyio.fail_after(30):
                while await pubsub.get_message(timeout=None) is None:
                    pass
            os.kill(old.pid or 0, signal.SIGSTOP)
            try:
                with anyio.move_on_after(STOPPED_FOR) as late:
                    after = await client.enqueue("work", 1)
                    await _started_on(new, namespace, after.id)
                assert not late.cancelled_caught, (
                    "the job enqueued after the switch did not start on the new primary"
                    f" within {STOPPED_FOR} s while the old one was stopped\n{fleet.tails()}"
                )
            finally:
                os.kill(old.pid or 0, signal.SIGCONT)
                await pubsub.aclose()  # type: ignore[no-untyped-call]
                await sentinel.aclose()
            tg.cancel_scope.cancel()
        return before.id, after.id

    before, after = anyio.run(scenario)
    with new.client(socket_timeout=2) as r:
        assert r.exists("{" + namespace + "}:job:" + after), "enqueued on the old primary"
        assert r.exists("{" + namespace + "}:job:" + before), "replicated before the switch"
    assert [w for w in fleet.workers if not w.alive] == [], fleet.tails()


async def _started_on(server: RedisServer, namespace: str, job_id: str) -> None:
    """Wait until ``job_id`` has started on ``server`` (polled: nothing announces it)."""
    r = redis.asyncio.Redis(port=server.port, socket_timeout=2)
    try:
        while await r.hget("{" + namespace + "}:job:" + job_id, "started_at") is None:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    finally:
        await r.aclose()


@pytest.mark.timeout(60)
def test_the_sentinel_with_the_newest_configuration_names_the_primary(
    sentinel_group: SentinelGroup, namespace: str
) -> None:
    """Sentinels learn of a failover one after another: the one not yet told (here, one
    that watches another server under the same name, and never will be) is listed first,
    and the pool still goes to the primary of the newest configuration."""
    group = sentinel_group
    old = group.primary()
    _failover(group)
    new = group.wait_failover(old)
    with RedisServer() as stale_server:
        stale = Sentinel(sentinel_binary(), stale_server.port, 1)
        try:
            sentinels = [stale, *group.sentinels]
            url = "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in sentinels)

            async def located() -> tuple[str, int]:
                async with Client.from_url(f"{url}/{SERVICE}", namespace) as client:
                    pool = client.admin.shards[0].redis.connection_pool
                    where: tuple[str, int] = await pool.locate()  # type: ignore[attr-defined]
                    await client.enqueue("work", 1)
                    return where

            assert anyio.run(located) == ("127.0.0.1", new.port)
            with new.client() as r:
                assert r.llen("{" + namespace + "}:queue:work") == 1
        finally:
            stale.close()


def _failover(group: SentinelGroup) -> None:
    """``SENTINEL FAILOVER``, asked again while the sentinel has not yet judged the
    replica fit (``NOGOODSLAVE`` just after the group started)."""
    deadline = time.monotonic() + 30
    with redis.Redis(port=group.sentinels[0].port, socket_timeout=2) as s:
        while True:
            try:
                s.execute_command("SENTINEL", "FAILOVER", SERVICE)
                return
            except redis.ResponseError as exc:
                if "NOGOODSLAVE" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
