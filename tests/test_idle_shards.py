"""An idle pool over several shards on one server: its upkeep runs in shard 0 and one
look spans the others, so its commands do not grow with the shards (see
rota.worker.idle; what that quiet must not cost, a job leased in an idle shard by a pool
that dies, is tests/chaos/test_idle_shard_kill9.py's)."""

from __future__ import annotations

from collections import Counter

from rota.worker.rounds import BEAT, REAP, TICK, rounds_of
from tests.helpers import rounds, wait_until
from tests.monitoring import TAG, Monitor, idle_pool
from tests.redis_server import RedisServer

K = 8
INTERVAL = 0.2


def _by_shard(seen: list[tuple[bool, list[str]]], tags: list[str]) -> Counter[str]:
    """The commands whose keys all belong to one shard but shard 0, by shard and
    command ("3 FCALL", "3 lua HSET"); a command over several shards (one EXISTS, one
    BLPOP for them all) is the pool's, not a shard's, and is left out."""
    per: Counter[str] = Counter()
    for lua, words in seen:
        named = {tags.index(t) for w in words[1:] for t in TAG.findall(w) if t in tags}
        if len(named) == 1 and 0 not in named:
            per[f"{named.pop()} {'lua ' if lua else ''}{words[0].upper()}"] += 1
    return per


async def test_an_idle_pool_sends_nothing_to_one_shard_alone_but_shard_0_on_one_server(
    fresh_redis_server: RedisServer,
) -> None:
    """Over eight heartbeat intervals and several reaper passes and scheduler ticks, an
    idle pool over 8 shards runs no command in a shard but 0 alone: no beat, no reaper
    check, no scheduler check there (each of those was a command or a script a shard an
    interval; the ticks are those of the schedulers' timers, not woken ones). Its forget
    pass of idle names (once in 12 reaper passes, a turn per shard) is turned off, so
    that the window holds the loops that run at every interval only."""
    namespace = "idleshards"
    pool, tags = idle_pool(fresh_redis_server.url, namespace, K, INTERVAL, INTERVAL)
    monitor = Monitor([fresh_redis_server])
    async with pool.running() as rt:
        await rounds(pool, BEAT, n=2)  # past the start, and shard 0's first look
        counts = rounds_of(rt.pool_id)
        ticks = counts.mark(TICK)  # not waited on with rounds(): a nudge is a wake token
        monitor.start()
        await rounds(pool, BEAT, n=8)
        await rounds(pool, REAP, n=2)
        await wait_until(lambda: counts.since(TICK, ticks, 2))
        await monitor.stop()
    seen = monitor.seen[0]
    assert any(words[0].upper() == "FCALL" for _, words in seen), "the window saw no beat"
    assert _by_shard(seen, tags) == Counter(), _by_shard(seen, tags)
