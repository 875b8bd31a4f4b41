"""The read-only function ``run_times`` adds up what the plain read adds up: every
detailed name's buckets over the hour's or the day's slots, per shard, whatever others
wrote in those hashes (a field that is no bucket, a count that is no whole number or
past 2^53, a key of another type), and sums past what a Lua number holds exactly."""

from __future__ import annotations

import datetime as dt
from typing import Any

import redis

from rota import Client
from rota.client.run_times import shard_run_times
from rota.protocol import read_calls
from rota.protocol.run_times import slot_of, slots

AT = dt.datetime(2026, 11, 28, 9, 55, 30, tzinfo=dt.UTC)
NAMES = ["a", "b", "c", "empty", "never"]


def _fill(client: Client, r: redis.Redis) -> None:
    """Counters of ``a``, ``b`` and ``c`` in every shard, some written by others."""
    now = slot_of(AT)
    hours_ago = slot_of(AT - dt.timedelta(hours=5))
    days_ago = slot_of(AT - dt.timedelta(hours=30))  # no window's
    for i, shard in enumerate(client.admin.shards):
        k = shard.keys
        r.hset(k.run_times("a", now), mapping={"0": i + 1, "5": 3, "39": 2})
        r.hset(k.run_times("a", hours_ago), mapping={"5": 4, "12": 1})  # the day's only
        r.hset(k.run_times("a", days_ago), mapping={"5": 100})
        garbage: dict[str, str | int] = {"x": 1, "05": 2, "40": 1, "1": "1.5", "3": "1e300"}
        garbage |= {"2": "-3"}
        garbage |= {"4": " 5", "6": "+5", "7": "1_0", "8": "9007199254740993"}
        garbage |= {"9": "0009", "10": "0"}  # 9 and 0: digits
        for field, value in garbage.items():
            r.hset(k.run_times("b", now), field, value)
        # 2^53 and 2^53 - 1: a sum a Lua number rounds
        r.hset(k.run_times("b", hours_ago), "11", str(2**53))
        r.hset(k.run_times("b", slot_of(AT - dt.timedelta(minutes=10))), "11", str(2**53 - 1))
        r.set(k.run_times("c", now), "a string")  # another type: nothing
        r.hset(k.run_times("c", hours_ago), "3", 7)
        r.hset(k.run_times("empty", now), "x", "y")


def _fcall_ro(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return int(stats.get("cmdstat_fcall_ro", {}).get("calls", 0))


async def test_the_function_adds_up_what_the_plain_read_adds_up(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    async with (
        Client.from_url(redis_url, namespace, shards=2) as client,
        Client.from_url(redis_url, namespace, shards=2) as plain,
    ):
        await client.enqueue("a")  # loads the library
        _fill(client, redis_sync)
        for shard in plain.admin.shards:
            shard.script_mode.use_functions(False)
        redis_sync.config_resetstat()
        for window in ("hour", "day"):
            got = await client.admin.run_times.of_names(NAMES, window, at=AT.timestamp())
            assert got == await plain.admin.run_times.of_names(NAMES, window, at=AT.timestamp())
            a, b, c, empty, never = got
            assert a.count == (13 if window == "hour" else 23)
            assert b.buckets[11].count == (2**54 - 1 if window == "day" else 2**53 - 1) * 2
            assert b.buckets[9].count == 18 and b.count == b.buckets[11].count + 18
            assert (c.count, empty.count, never.count) == (0 if window == "hour" else 14, 0, 0)
        assert _fcall_ro(redis_sync) == 4  # a call a shard and window, none by ``plain``
        day = slots("day", AT.timestamp())
        for shard in client.admin.shards:
            assert await read_calls.run_times(shard.scope, day, []) == []
            assert await shard_run_times(shard, [], day) == []
