"""The read-only function ``look`` over the shards of one server: whether any of the
keys named holds something, or (a negative count) whether each shard's do, in turn,
or (by kind) which kinds of keys each shard holds, as the pool's look a cluster node
reads them (rota.worker.nodelook)."""

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


async def test_the_look_by_kind_answers_each_shards_kinds_in_turn(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """Each shard in turn, its kinds found as bits (the last kind that can hold what
    the shard's one EXISTS counted is not asked, but found all the same); a set
    without the member asked (the node lost its data) answers an empty list."""
    async with Client.from_url(redis_url, namespace, shards=3) as client:
        shards = client.admin.shards
        scope = shards[0].scope
        kinds = [[[s.keys.dead], [s.keys.scheduled], [s.keys.ready]] for s in shards]
        kinds[0] = [[], [], [shards[0].keys.ready]]
        assert await read_calls.look_kinds(scope, kinds) == [0, 0, 0]
        redis_sync.sadd(shards[1].keys.ready, "n")
        redis_sync.zadd(shards[2].keys.dead, {"j": 1})
        redis_sync.zadd(shards[2].keys.scheduled, {"j": 1})
        redis_sync.sadd(shards[0].keys.ready, "n")
        assert await read_calls.look_kinds(scope, kinds) == [4, 4, 3]
        lost = (shards[1].keys.names, "nobody")
        assert await read_calls.look_kinds(scope, kinds, lost) == []
