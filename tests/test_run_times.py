"""Run-time percentiles and histograms per job name: the finish script counts each
attempt's run time in its name's bucket of the current ten-minute slot, and
``client.admin.run_times`` adds the slots of the last hour or day up over every shard.
Run times are set by hand (each job's ``started_at`` before its finish), so the
distribution is known exactly."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from pathlib import Path

import pytest
import redis

from rota import Client
from rota.client.shard import Shard
from rota.protocol import calls
from rota.protocol.run_times import BOUNDS, BUCKETS, bucket_of, slot_of
from rota.protocol.scripts import script
from tests.helpers import finish_args

NAME = "resize"
#: A present in the middle of a slot, so that a finish and the read agree on it.
AT = dt.datetime(2026, 11, 28, 9, 55, 30, tzinfo=dt.UTC)
NOW_MS = int(AT.timestamp() * 1000)


async def finish_with_run_times(
    client: Client,
    name: str,
    run_ms: list[int],
    outcome: list[str | int] | None = None,
    now_ms: int = NOW_MS,
) -> None:
    """Enqueue ``len(run_ms)`` jobs of ``name`` (spread over the shards by their ids),
    lease each on its shard, set its start so that it ran ``run_ms[i]`` ms at ``now_ms``
    and finish it with ``outcome`` (default: complete)."""
    for _ in run_ms:
        await client.enqueue(name)
    times = iter(run_ms)
    done = 0
    for shard in client.admin.shards:
        reply = await calls.fetch(
            shard.scope, calls.Lessee(30000, "pool-1", 1 << 20), [name] * len(run_ms), []
        )
        rows: list[str | int] = []
        for job in reply.jobs:
            await shard.redis.hset(shard.keys.job(job.id), "started_at", now_ms - next(times))
            rows += [job.id, name, job.token, *(outcome or ["complete", "", 0, ""])]
            done += 1
        if rows:
            await _finish(shard, rows, now_ms)
    assert done == len(run_ms)


async def _finish(shard: Shard, rows: list[str | int], now_ms: int) -> None:
    args = finish_args(now_ms, rows)
    assert await script("finish")(shard.redis, shard.keys.prefix, args, shard.script_mode) == []


def _nearest_rank(values: list[int], pct: int) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct * len(values) / 100)) - 1]


def test_the_bounds_are_log_spaced_and_the_lua_helper_holds_the_same() -> None:
    assert list(BOUNDS) == [math.ceil(1.5**i) for i in range(len(BOUNDS))]
    assert all(a < b for a, b in itertools.pairwise(BOUNDS))
    # a bound is at most 1.5 times the ms after the one before it
    assert all(b < 1.5 * (a + 1) for a, b in itertools.pairwise(BOUNDS))
    lua = (Path(__file__).parents[1] / "src/rota/protocol/lua/_runtimes.lua").read_text()
    table = re.search(r"local RT_BOUNDS = \{([^}]*)\}", lua)
    assert table is not None
    assert [int(x) for x in table.group(1).split(",")] == list(BOUNDS)
    assert (bucket_of(0), bucket_of(1), bucket_of(2), bucket_of(5), bucket_of(10**12)) == (
        0,
        0,
        1,
        4,
        BUCKETS - 1,
    )


async def test_percentiles_of_a_known_distribution_are_within_the_bucket_error(
    client: Client,
) -> None:
    # every bound and the ms after it (where Lua and Python must place them alike),
    # and a heavy middle around 300 ms
    run_ms = [v for b in BOUNDS for v in (b, b + 1)] + [300 + 7 * i for i in range(60)]
    await finish_with_run_times(client, NAME, run_ms)

    got = await client.admin.run_times.of(NAME, "hour", at=AT.timestamp())

    assert got.count == len(run_ms)
    want = [0] * BUCKETS
    for v in run_ms:
        want[bucket_of(v)] += 1
    assert [b.count for b in got.buckets] == want
    assert [b.le_ms for b in got.buckets] == [*BOUNDS, None]
    for pct, value in ((50, got.p50_ms), (95, got.p95_ms), (99, got.p99_ms)):
        true = _nearest_rank(run_ms, pct)
        assert value is not None
        assert true <= value < 1.5 * true, (pct, true, value)
    assert got.max_ms is None  # the last bound + 1 ms is in the open bucket
    assert got.p99_ms is not None
    day = await client.admin.run_times.of(NAME, "day", at=AT.timestamp())
    assert day.buckets == got.buckets


async def test_failed_attempts_count_and_those_cut_short_do_not(client: Client) -> None:
    await finish_with_run_times(client, NAME, [50, 50], ["retry", NOW_MS + 1000, "boom", "error"])
    await finish_with_run_times(client, NAME, [5000], ["dead", "", "timed out", "timeout"])
    await finish_with_run_times(client, NAME, [900], ["aborted", 0, "stopped", ""])
    await finish_with_run_times(client, NAME, [900], ["requeue", "", "", ""])

    got = await client.admin.run_times.of(NAME, at=AT.timestamp())

    assert got.count == 3
    assert {b.le_ms: b.count for b in got.buckets if b.count} == {58: 2, 7482: 1}
    assert (got.p50_ms, got.max_ms) == (58, 7482)


@pytest.mark.one_shard("writes one shard's slots by hand")
async def test_a_slot_older_than_the_window_is_not_counted(
    client: Client, redis_sync: redis.Redis
) -> None:
    keys = client.admin.shards[0].keys
    for minutes, bucket in ((0, "10"), (65, "11"), (75, "12"), (23 * 60, "13"), (25 * 60, "14")):
        slot = slot_of(AT - dt.timedelta(minutes=minutes))
        redis_sync.hset(keys.run_times(NAME, slot), bucket, 1)

    hour = await client.admin.run_times.of(NAME, "hour", at=AT.timestamp())
    day = await client.admin.run_times.of(NAME, "day", at=AT.timestamp())

    assert {i for i, b in enumerate(hour.buckets) if b.count} == {10, 11}
    assert {i for i, b in enumerate(day.buckets) if b.count} == {10, 11, 12, 13}
    assert await client.admin.run_times.windows(NAME, at=AT.timestamp()) == [hour, day]


async def test_garbage_in_the_counters_reads_as_nothing_and_a_finish_starts_it_again(
    client: Client, redis_sync: redis.Redis
) -> None:
    slot = slot_of(AT)
    shards = client.admin.shards
    for shard in shards:
        redis_sync.hset(
            shard.keys.run_times(NAME, slot),
            mapping={
                "3": "text",
                "4": "nan",
                "5": "-7",
                "6": "1e300",
                "7": "1.5",
                "8": str(2**60),
                "9": "2",
                "zzz": "1",
                "99": "5",
            },
        )
    redis_sync.rpush(shards[0].keys.run_times(NAME, slot_of(AT - dt.timedelta(minutes=10))), "x")

    got = await client.admin.run_times.of(NAME, at=AT.timestamp())
    assert got.count == 2 * len(shards)
    assert {b.le_ms: b.count for b in got.buckets if b.count} == {39: 2 * len(shards)}

    await finish_with_run_times(client, NAME, [4, 12])  # buckets 3 ('text') and 6 ('1e300')
    got = await client.admin.run_times.of(NAME, at=AT.timestamp())
    assert {b.le_ms: b.count for b in got.buckets if b.count} == {4: 1, 12: 1, 39: 2 * len(shards)}

    # a slot of another type (a list) costs the finish nothing but its counts
    for shard in shards:
        redis_sync.rpush(shard.keys.run_times("other", slot), "x")
    await finish_with_run_times(client, "other", [5])  # its finish answers no error
    assert (await client.admin.run_times.of("other", at=AT.timestamp())).count == 0


async def test_a_name_without_runs_reads_empty_and_bad_arguments_are_refused(
    client: Client,
) -> None:
    got = await client.admin.run_times.of("nothing", "day", at=AT.timestamp())
    figures = (got.count, got.p50_ms, got.p95_ms, got.p99_ms, got.max_ms)
    assert figures == (0, None, None, None, None)
    assert len(got.buckets) == BUCKETS
    with pytest.raises(ValueError, match="window: 'hour' or 'day', not 'week'"):
        await client.admin.run_times.of(NAME, "week")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid job name"):
        await client.admin.run_times.of("a b")


@pytest.mark.one_shard("reads one shard's key")
async def test_a_slot_expires_a_day_after_its_last_new_bucket(
    client: Client, redis_sync: redis.Redis
) -> None:
    await finish_with_run_times(client, NAME, [20])
    key = client.admin.shards[0].keys.run_times(NAME, slot_of(AT))
    assert 86_400 < redis_sync.ttl(key) <= 90_000
