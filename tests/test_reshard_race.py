"""A job that reaches a shard being retired after the command's last look at it (a child
routed to its parent's old home, in the moment between the drain and the move): the
move leaves its record where it runs, the command waits for it again, and it runs
once and completes."""

from __future__ import annotations

import sys
import threading
from collections import Counter

import anyio

from rota import Client, JobContext, WorkerPool
from rota.client.resize import resize
from rota.protocol.shards import shard_of, shard_tags
from tests.helpers import pool_settings, wait_until


async def test_a_child_sent_to_its_parents_old_home_after_the_drain_runs_once(
    redis_url: str, namespace: str
) -> None:
    while not set(shard_tags(namespace, 2)) - set(shard_tags(namespace, 4)):
        namespace += "x"  # a namespace whose change retires a shard
    old = shard_tags(namespace, 2)
    tag = next(t for t in old if t not in shard_tags(namespace, 4))
    n = 0
    while old[shard_of(f"p{n}", 2)] != tag:
        n += 1
    parent = f"p{n}"
    async with Client.from_url(redis_url, namespace) as op:
        await resize(op, 2)
    pool = WorkerPool(
        settings=pool_settings(
            redis_url, namespace, shards=2, heartbeat_interval=0.1, keep_result=600
        )
    )
    ran = Counter[str]()

    @pool.job(name="step")
    async def step(ctx: JobContext) -> str:
        ran[ctx.id] += 1
        await anyio.sleep(0.3)
        return ctx.id

    child: list[str] = []

    def enqueue_child() -> None:
        async def send() -> None:
            async with Client.from_url(redis_url, namespace) as producer:
                child.append((await producer.enqueue("step", after=[parent])).id)

        anyio.run(send)

    def say(line: str) -> None:
        sys.stdout.write(f"resize: {line}\n")
        if line.startswith("live jobs left: ") and not child:  # the drain's last look
            sender = threading.Thread(target=enqueue_child)
            sender.start()
            sender.join()

    async with Client.from_url(redis_url, namespace) as op, pool.running():
        await op.enqueue("step", job_id=parent)
        await wait_until(lambda: ran[parent] == 1, within=20)
        await wait_until(lambda: _done(op, parent), within=20)
        done = await resize(op, 4, timeout=60, say=say)
        assert done.done and done.live == {} and done.lingering == {}
        assert child
        await wait_until(lambda: _done(op, child[0]), within=20)
        job = await op.job(child[0])
        assert job is not None and job.state == "complete", job
    assert ran[child[0]] == 1


async def _done(op: Client, job_id: str) -> bool:
    job = await op.job(job_id)
    return job is not None and job.state in ("complete", "dead")
