"""Priority-weighted round robin: shares follow priorities, FIFO holds inside a queue."""

from __future__ import annotations

from collections import Counter

import pytest

from rota import Client, JobContext, JobSpec, WorkerPool
from tests.helpers import pool_settings, starts_by_priority, wait_until


@pytest.mark.one_shard("FIFO holds within a shard, not across shards")
async def test_shares_follow_priorities_and_fifo_holds(
    client: Client, redis_url: str, namespace: str
) -> None:
    priorities = {"low": 1, "mid": 2, "high": 4}
    settings = pool_settings(redis_url, namespace, concurrency=10)
    started = await starts_by_priority(client, settings, priorities, 7000)

    first = Counter(name for name, _, _ in started[:7000])
    for name, priority in priorities.items():
        expected = 7000 * priority / 7
        assert abs(first[name] - expected) <= 0.02 * expected, (name, first)
    for name in priorities:
        seqs = [seq for n, seq, _ in started if n == name]
        assert seqs == sorted(seqs), f"{name} ran out of order"
        assert seqs == list(range(len(seqs)))


@pytest.mark.one_shard("FIFO holds within a shard, not across shards")
async def test_a_batch_is_filled_from_other_names_when_its_names_are_empty(
    client: Client, redis_url: str, namespace: str
) -> None:
    """With one free worker the robin names one queue per fetch; when that queue is
    empty the fetch takes from the pool's other names instead of waiting for a wake."""
    done: list[int] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, concurrency=1))

    @pool.job
    async def idle_a(ctx: JobContext) -> None: ...

    @pool.job
    async def idle_b(ctx: JobContext) -> None: ...

    @pool.job
    async def busy(ctx: JobContext, seq: int) -> None:
        done.append(seq)

    await client.enqueue_many([JobSpec(name="busy", kwargs={"seq": i}) for i in range(60)])
    async with pool.running():
        # one wake timeout (2 s) per empty fetch would take a minute
        await wait_until(lambda: len(done) == 60, within=3)
    assert done == list(range(60))
