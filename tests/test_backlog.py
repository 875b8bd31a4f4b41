"""The read-only function ``backlog`` counts what the plain commands count: a shard's
queued (plain and keyed) and running jobs per name and over its names, whatever others
wrote in those keys (a key of another type, a keyed count that is no whole number), as
:func:`rota.protocol.job.count_of` reads them."""

from __future__ import annotations

import redis

from rota import Client, JobSpec
from rota.protocol import read_calls


async def test_the_function_counts_what_the_commands_count(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    async with Client.from_url(redis_url, namespace) as client:  # one shard
        await _compare(client, redis_sync)


async def _compare(client: Client, redis_sync: redis.Redis) -> None:
    await client.enqueue_many([JobSpec(name=n) for n in ("a", "a", "b", "c", "d", "e", "f")])
    await client.enqueue_many([JobSpec(name="g", fair_key=f"t{i}") for i in range(3)])
    shard = client.admin.shards[0]
    k = shard.keys
    redis_sync.delete(k.queue("b"))
    redis_sync.set(k.queue("b"), "a string")  # another type: 0
    for name, n in (("c", "x"), ("d", "1.5"), ("e", "-3"), ("f", "1e300")):
        redis_sync.hset(k.fair(name), "n", n)
    redis_sync.zadd(k.running("a"), {"j1": 1, "j2": 2})
    redis_sync.sadd(k.leased, "a")
    redis_sync.zadd(k.running("c"), {"j3": 1})  # not leased: not read
    redis_sync.sadd(k.names, "gone")  # a name with no key at all
    names = [*sorted({"a", "b", "c", "d", "e", "f", "g", "gone"}), "never"]
    assert await read_calls.backlog(shard.scope, names) is not None  # the function ran
    each = await shard.backlog(names)
    assert each == await shard.backlog_piped(names)
    assert each["a"] == (2, 2) and each["d"] == (2, 0) and each["g"] == (3, 0)
    total = await shard.backlog_total()
    held = await shard.backlog_piped(await shard.names())
    assert total == (sum(q for q, _ in held.values()), sum(r for _, r in held.values()))
