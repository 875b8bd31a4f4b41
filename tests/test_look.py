"""The read-only function ``look`` over the shards of one server: whether any of the
keys named holds something, or (a negative count) whether each shard's do, in turn,
as the fetchers' safety net of a cluster node reads its members' ready sets."""

from __future__ import annotations

import redis

from rota import Client
from rota.protocol import read_calls


async def test_the_look_answers_for_all_the_shards_or_for_each(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    async with Client.from_url(redis_url, namespace, shards=3) as client:
        shards = client.admin.shards
        scope = shards[0].scope
        ready = [[s.keys.ready] for s in shards]
        assert await read_calls.look_each(scope, ready) == [False, False, False]
        assert await read_calls.look(scope, ready) == 0
        redis_sync.sadd(shards[1].keys.ready, "n")
        assert await read_calls.look_each(scope, ready) == [False, True, False]
        assert await read_calls.look(scope, ready) == 1
        two = [[s.keys.ready, s.keys.queue("n")] for s in shards]
        redis_sync.lpush(shards[2].keys.queue("n"), "j")
        assert await read_calls.look_each(scope, two) == [False, True, True]
