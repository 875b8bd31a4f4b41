"""Chains and groups whose job ids the producer chose, over four shards: a chosen id
names no shard, so each step must go where the step before it went (see
rota.protocol.shards), not where its own id or its parent's id points."""

from __future__ import annotations

import itertools
from typing import Any

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.protocol.shards import shard_of
from tests.helpers import pool_settings

K = 4


def _spec(label: str, job_id: str | None = None, **options: Any) -> JobSpec:
    return JobSpec(name="step", kwargs={"label": label}, job_id=job_id, **options)


async def test_chains_and_groups_of_chosen_ids_run_over_four_shards(
    redis_url: str, namespace: str
) -> None:
    pool = WorkerPool(
        settings=pool_settings(redis_url, namespace, shards=K, keep_result=600, concurrency=8)
    )

    @pool.job
    async def step(ctx: JobContext, label: str) -> str:
        return label.upper()

    @pool.job
    async def total(ctx: JobContext) -> list[Any]:
        return sorted(ctx.parent_results.values())

    ids = [f"order-7-step-{i}" for i in range(6)]
    # The ids name different shards one after the other: routed by the id before it,
    # a step looked for its parent in the wrong shard ("parent does not exist").
    assert all(shard_of(a, K) != shard_of(b, K) for a, b in itertools.pairwise(ids))
    async with Client.from_url(redis_url, namespace, shards=K) as client:
        chain = await client.chain([_spec(i, i) for i in ids])
        # Ids rota draws between chosen ones go where their chain goes too.
        mixed = await client.chain(
            [_spec("m0", "mixed-0"), _spec("m1"), _spec("m2", "mixed-3"), _spec("m3")]
        )
        # Each drawn id names the shard its chain went to, the one of its first step,
        # not the one its parent's chosen id names.
        assert shard_of("mixed-3", K) != shard_of("mixed-0", K)
        home = client.admin.shards[shard_of("mixed-0", K)]
        for job in mixed:
            assert await home.job(job.id) is not None
        assert {shard_of(mixed[1].id, K), shard_of(mixed[3].id, K)} == {shard_of("mixed-0", K)}
        group = await client.group(
            [_spec(f"g{i}", f"invoice-9-line-{i}") for i in range(8)],
            then=JobSpec(name="total"),
            group_id="invoice-9",
        )
        # A chain after the group's callback, from another call: the callback is in the
        # group's shard, not the one its id names; the chain goes there too.
        assert group.then is not None and group.then.id == "invoice-9-then"
        assert shard_of("invoice-9-then", K) != shard_of("invoice-9", K)
        after = await client.chain(
            [_spec("a0", "after-9", after=("invoice-9-then",)), _spec("a1"), _spec("a2")]
        )
        assert shard_of(after[1].id, K) == shard_of("invoice-9", K)
        async with pool.running():
            assert await client.wait(chain[-1].id, timeout=20) == ids[-1].upper()
            assert await client.wait(mixed[-1].id, timeout=20) == "M3"
            assert group.then is not None
            assert await client.wait(group.then.id, timeout=20) == [f"G{i}" for i in range(8)]
            assert await client.wait(after[-1].id, timeout=20) == "A2"
        for job in chain:
            record = await client.job(job.id)
            assert record is not None and record.state == "complete"
        assert await client.admin.dependency_results(chain[-1].id) == {ids[-2]: ids[-2].upper()}
        assert (await client.group_progress(group.id)).done == 8
