"""Quiet, stop and resume a live pool (or every pool of a host) through Redis: the pool
obeys at its next heartbeat and says so in its snapshot's state."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from rota import Client, JobContext, State, WorkerPool
from rota.client.pools import PoolNotFound, StopIsFinal
from rota.worker.rounds import BEAT
from tests.helpers import pool_settings, rounds, wait_until

BEAT_S = 0.1  # heartbeat interval of the pools here: a command is obeyed within it


def held_pool(
    redis_url: str, namespace: str, **changes: object
) -> tuple[WorkerPool, dict[str, Any]]:
    """A pool whose ``hold`` jobs run until their label's event is set, and whose
    ``work`` jobs say whether the test had resumed the pool when they started."""
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, heartbeat_interval=BEAT_S, **changes)
    )
    seen: dict[str, Any] = {
        "started": [],
        "finished": [],
        "events": {},
        "resumed": False,
        "work": [],
    }

    @pool.job(max_fails=1)
    async def hold(ctx: JobContext, label: str) -> str:
        seen["started"].append(label)
        await seen["events"].setdefault(label, anyio.Event()).wait()
        seen["finished"].append(label)
        return label

    @pool.job
    async def work(ctx: JobContext) -> None:
        seen["work"].append(seen["resumed"])

    return pool, seen


async def state_of(client: Client, pool_id: str) -> str | None:
    """The state the pool's latest snapshot says (None: not live)."""
    return next((p.state for p in await client.admin.pools() if p.id == pool_id), None)


def says(client: Client, pool_id: str, state: str | None) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await state_of(client, pool_id) == state

    return check


async def test_a_quiet_pool_finishes_what_it_runs_takes_nothing_new_until_resumed(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = held_pool(redis_url, namespace, keep_result=60)
    held = await client.enqueue("hold", label="a")
    with anyio.fail_after(30):
        async with pool.running() as rt:
            await wait_until(lambda: seen["started"] == ["a"])
            await client.admin.commands.quiet_pool(rt.pool_id)
            await wait_until(says(client, rt.pool_id, "quiet"))
            assert await client.admin.commands.read() == {rt.pool_id: "quiet"}
            # enqueued after the pool said quiet: it waits until the pool resumes
            later = await client.enqueue("work")
            seen["events"]["a"].set()  # the held job finishes
            await wait_until(lambda: seen["finished"] == ["a"])
            await rounds(pool, BEAT, 2)  # the quiet pool beats on, and stays quiet
            assert await state_of(client, rt.pool_id) == "quiet"
            record = await client.job(later.id)
            assert record is not None and record.state == State.QUEUED
            seen["resumed"] = True
            await client.admin.commands.resume_pool(rt.pool_id)
            await wait_until(lambda: seen["work"] == [True])
            await wait_until(says(client, rt.pool_id, "running"))
            assert await client.admin.commands.read() == {}
    done = await client.job(held.id)
    assert done is not None and done.state == State.COMPLETE


async def test_a_stopped_pool_drains_as_on_sigterm_and_its_block_ends(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = held_pool(redis_url, namespace, grace=3.0, keep_result=60)
    short = await client.enqueue("hold", label="short")
    long = await client.enqueue("hold", label="long")
    stopping = anyio.Event()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:

            async def release_once_stopping(pool_id: str) -> None:
                await wait_until(says(client, pool_id, "stopping"))
                stopping.set()
                seen["events"]["short"].set()  # finishes within the grace; long does not

            async with pool.running() as rt:
                pool_id = rt.pool_id
                await wait_until(lambda: sorted(seen["started"]) == ["long", "short"])
                tg.start_soon(release_once_stopping, pool_id)
                await client.admin.commands.stop_pool(pool_id)
                await anyio.sleep_forever()  # the stop ends the block
    assert stopping.is_set()
    assert seen["finished"] == ["short"]
    finished, back = await client.job(short.id), await client.job(long.id)
    assert finished is not None and finished.state == State.COMPLETE
    assert back is not None and back.state == State.QUEUED  # back in its queue
    assert await state_of(client, pool_id) is None  # its heartbeat is gone
    assert await client.admin.commands.read() == {}  # and so is its command


async def test_a_stop_is_final_and_unknown_pools_are_refused(
    client: Client, redis_url: str, namespace: str
) -> None:
    pool, seen = held_pool(redis_url, namespace, grace=0.5)
    await client.enqueue("hold", label="a")
    with pytest.raises(PoolNotFound, match="no live pool nope"):
        await client.admin.commands.quiet_pool("nope")
    with pytest.raises(PoolNotFound, match="no live pool on host nohost"):
        await client.admin.commands.stop_host("nohost")
    with pytest.raises(ValueError, match="give a pool id or a host, not both"):
        await client.admin.commands.give("quiet", pool_id="a", host="b")
    with anyio.fail_after(30):
        async with pool.running() as rt:
            await wait_until(lambda: seen["started"] == ["a"])
            # told to stop before the pool has beaten: refused from then on
            async with client.admin.shards[0].redis.pipeline() as pipe:
                pipe.hset(client.admin.shards[0].keys.pool_commands, rt.pool_id, "stop")
                await pipe.execute()
            for command in ("quiet", "resume"):
                with pytest.raises(StopIsFinal, match="a stop cannot be taken back"):
                    await client.admin.commands.give(command, pool_id=rt.pool_id)
            await anyio.sleep_forever()


@contextlib.asynccontextmanager
async def two_hosts(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[tuple[WorkerPool, dict[str, Any], str]]]:
    """Two running pools, on hosts "host-a" and "host-b" (as their snapshots say)."""
    out = []
    leave = anyio.Event()
    async with anyio.create_task_group() as tg:
        for host in ("host-a", "host-b"):
            monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
            pool, seen = held_pool(redis_url, namespace)
            started, ended = anyio.Event(), anyio.Event()

            async def run(
                pool: WorkerPool = pool, started: anyio.Event = started, ended: anyio.Event = ended
            ) -> None:
                async with pool.running():
                    started.set()
                    await leave.wait()
                ended.set()

            tg.start_soon(run)
            await started.wait()
            assert pool.runtime is not None
            seen["ended"] = ended
            out.append((pool, seen, pool.runtime.pool_id))
        monkeypatch.undo()
        try:
            yield out
        finally:
            leave.set()  # the pools still running drain and leave


async def test_a_host_command_reaches_that_hosts_pools_only(
    client: Client, redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(30):
        async with two_hosts(redis_url, namespace, monkeypatch) as pools:
            (_, seen_a, a), (pool_b, seen_b, b) = pools
            assert await client.admin.commands.quiet_host("host-a") == [a]
            await wait_until(says(client, a, "quiet"))
            await rounds(pool_b, BEAT, 2)  # b beat twice since: not told
            assert await state_of(client, b) == "running"
            assert await client.admin.commands.resume_host("host-a") == [a]
            await wait_until(says(client, a, "running"))
            assert await client.admin.commands.quiet_host("host-a") == [a]
            await wait_until(says(client, a, "quiet"))
            assert await client.admin.commands.stop_host("host-a") == [a]  # a quiet pool stops too
            await seen_a["ended"].wait()  # a's block ended: it drained and left
            await wait_until(says(client, a, None))
            await rounds(pool_b, BEAT, 2)
            assert await state_of(client, b) == "running"
            assert not seen_b["ended"].is_set()


async def test_a_commands_key_of_another_type_stops_no_heartbeat(
    client: Client, redis_url: str, namespace: str
) -> None:
    shard = client.admin.shards[0]
    await shard.redis.set(shard.keys.pool_commands, "written by hand")
    pool, seen = held_pool(redis_url, namespace)
    with anyio.fail_after(30), capture_logs() as logs:
        async with pool.running() as rt:
            await rounds(pool, BEAT, 3)  # it beats on
            assert await state_of(client, rt.pool_id) == "running"
            assert await client.admin.commands.read() == {}
            await client.enqueue("work")
            await wait_until(lambda: seen["work"] == [False])
    warned = [e for e in logs if "holds another type than a hash" in e["event"]]
    assert len(warned) == 1


async def test_a_command_reaches_the_pool_by_its_message_before_its_next_heartbeat(
    client: Client, redis_url: str, namespace: str
) -> None:
    # heartbeats a minute apart: each ack comes from the beat the message brings forward
    pool, _ = held_pool(redis_url, namespace)
    pool.configure(pool.settings.replace(heartbeat_interval=60.0, lease=180.0))
    with anyio.fail_after(30):
        async with pool.running() as rt:
            for command, state in (("quiet", "quiet"), ("resume", "running")):
                await client.admin.commands.give(command, pool_id=rt.pool_id)  # type: ignore[arg-type]
                await wait_until(says(client, rt.pool_id, state), within=20)
            await client.admin.commands.stop_pool(rt.pool_id)
            await anyio.sleep_forever()  # ended by the stop
