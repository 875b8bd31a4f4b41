"""Fair keys, the operator's reads: the keys worth a look (those with a backlog, and
those with jobs running and none queued), one key's jobs in the order its turns take
them, paged, with its running ones; and garbage written by hand in a key's list, its
settings or its running set, shown as malformed, never a failure. Real Redis; jobs are
leased by the fetch script on the key's shard, as a pool would (any number of shards:
``ROTA_TEST_SHARDS=4`` runs these over four)."""

from __future__ import annotations

import pytest
import redis

from rota import Client, JobSpec
from rota.client.fair_top import RUNNING_SCAN, SCRAPE_WIDEST
from rota.protocol import calls
from rota.protocol.shards import shard_of


async def _keyed(client: Client, counts: dict[str, int]) -> dict[str, list[str]]:
    """``counts`` jobs of each key of job name ``hook``: their ids by key, in order."""
    specs = [
        JobSpec(name="hook", args=(i,), fair_key=key) for key, n in counts.items() for i in range(n)
    ]
    ids: dict[str, list[str]] = {key: [] for key in counts}
    for spec, job in zip(specs, await client.enqueue_many(specs), strict=True):
        ids[spec.fair_key or ""].append(job.id)
    return ids


async def _lease(client: Client, key: str, n: int) -> list[str]:
    """Lease ``n`` jobs of ``hook`` on the shard of ``key``: their ids, in order."""
    shards = client.admin.shards
    scope = shards[shard_of(key, len(shards))].scope
    reply = await calls.fetch(scope, calls.Lessee(30_000, "pool-1", 1 << 20), ["hook"] * n, [])
    return [job.id for job in reply.jobs]


def _prefix(client: Client, key: str) -> str:
    """The key prefix of the shard ``key`` lives in."""
    shards = client.admin.shards
    return shards[shard_of(key, len(shards))].keys.prefix


async def test_a_key_with_running_jobs_and_none_queued_is_listed(client: Client) -> None:
    await _keyed(client, {"busy": 2, "waiting": 3})
    await client.admin.fair.set_key_limit("hook", "busy", 5)
    for _ in range(8):  # the keys take turns: until busy has none queued
        if (await client.admin.fair.jobs("hook", "busy")).queued == 0:
            break
        await _lease(client, "busy", 1)
    rows = await client.admin.fair.of("hook")
    busy = rows[-1]  # the most queued first, then the most running
    assert (busy.key, busy.queued, busy.running, busy.limit) == ("busy", 0, 2, 5)
    assert rows[0].key == "waiting" and rows[0].queued > 0
    assert [r.key for r in await client.admin.fair.of("hook", top=1)] == ["waiting"]
    # the read of the scrape ranks the backlogs only
    tops = await client.admin.fair.of_names(["hook"], 10)
    assert [r.key for r in tops["hook"]] == ["waiting"]
    assert RUNNING_SCAN >= 2


async def test_one_keys_jobs_in_turn_order_paged_with_its_running_ones(client: Client) -> None:
    ids = (await _keyed(client, {"t": 7, "other": 2}))["t"]
    leased: list[str] = []
    while not leased or leased[-1] not in ids:  # other's job may take the first turn
        leased += await _lease(client, "t", 1)
        assert len(leased) <= 3
    first = await client.admin.fair.jobs("hook", "t", 0, 4)
    assert (first.queued, first.running, first.offset, first.count) == (6, 1, 0, 4)
    assert [j.id for j in first.jobs] == ids[1:5]  # the next to run first
    assert {j.state for j in first.jobs} == {"queued"}
    assert first.jobs[0].enqueued_at is not None and first.jobs[0].name == "hook"
    (running,) = first.running_jobs
    assert (running.id, running.state) == (ids[0], "running")
    assert running.deadline is not None and running.started_at is not None
    second = await client.admin.fair.jobs("hook", "t", 4, 4)
    assert [j.id for j in second.jobs] == ids[5:]
    assert (await client.admin.fair.jobs("hook", "t", 6, 4)).jobs == []
    nobody = await client.admin.fair.jobs("hook", "nobody")
    assert (nobody.queued, nobody.running, nobody.jobs, nobody.running_jobs) == (0, 0, [], [])


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"offset": -1}, "offset"),
        ({"count": 0}, "count"),
        ({"count": 1001}, "count"),
        ({"key": "with space"}, "key"),
        ({"name": "no such name!"}, "name"),
    ],
)
async def test_a_page_out_of_range_is_refused_in_one_line(
    client: Client, kwargs: dict[str, object], said: str
) -> None:
    args: dict[str, object] = {"name": "hook", "key": "t", **kwargs}
    with pytest.raises(ValueError, match=said):
        await client.admin.fair.jobs(**args)  # type: ignore[arg-type]


async def test_garbage_in_a_keys_list_settings_and_running_set_shows_as_malformed(
    client: Client, redis_sync: redis.Redis
) -> None:
    ids = (await _keyed(client, {"a": 2, "b": 1}))["a"]
    pa, pb = _prefix(client, "a"), _prefix(client, "b")
    redis_sync.lpush(pa + "fqueue:hook/a", "not an id!", "gone-job")  # at the head: last
    redis_sync.hset(pa + "fset:hook", mapping={"w/a": "nan", "r/a": "fast"})
    redis_sync.hset(pa + "frun:hook/a", "x", "1")  # a hash where a sorted set belongs
    redis_sync.delete(pb + "fqueue:hook/b")
    redis_sync.set(pb + "fqueue:hook/b", "a string")
    rows = {r.key: r for r in await client.admin.fair.of("hook")}
    a = rows["a"]
    assert (a.weight, a.rate, a.running) == (1, None, 0)
    assert a.malformed == ["rate", "running", "weight"]
    page = await client.admin.fair.jobs("hook", "a")
    assert page.malformed == ["rate", "running", "weight"] and page.running_jobs == []
    assert (page.weight, page.rate) == (1, None)
    assert [(j.id, j.state) for j in page.jobs] == [
        (ids[0], "queued"),
        (ids[1], "queued"),
        ("not an id!", "malformed"),
        ("gone-job", "missing"),
    ]
    b = await client.admin.fair.jobs("hook", "b")
    assert (b.queued, b.jobs, b.malformed) == (0, [], ["queue"])


@pytest.mark.one_shard("the names' backlogs are written by hand in one shard")
async def test_a_backlog_running_set_or_settings_of_another_type_read_as_none(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    await _keyed(client, {"a": 1})
    p = "{" + namespace + "}:"
    redis_sync.delete(p + "fbacklog:hook")
    redis_sync.set(p + "fbacklog:hook", "text")
    redis_sync.set(p + "running:hook", "text")
    assert await client.admin.fair.of("hook") == []
    assert await client.admin.fair.of_names(["hook"], 10) == {}
    # the name's settings of another type: every one read as the default, and said
    redis_sync.delete(p + "fbacklog:hook")
    redis_sync.zadd(p + "fbacklog:hook", {"a": 1})
    redis_sync.set(p + "fset:hook", "text")
    (a,) = await client.admin.fair.of("hook")
    assert (a.queued, a.limit, a.weight, a.paused) == (1, None, 1, False)
    assert a.malformed == ["limit", "rate", "weight"]
    page = await client.admin.fair.jobs("hook", "a")
    assert page.malformed == ["limit", "rate", "weight"] and len(page.jobs) == 1


async def test_the_reads_old_names_warn_and_answer_as_the_new_ones(client: Client) -> None:
    """``fair_keys``, ``top_fair_keys`` and ``fair_key_jobs`` are kept one release."""
    await _keyed(client, {"a": 2})
    fair = client.admin.fair
    with pytest.warns(
        DeprecationWarning,
        match=r"\Aclient\.admin\.fair\.fair_keys is deprecated: use client\.admin\.fair\.of\Z",
    ):
        assert await fair.fair_keys("hook") == await fair.of("hook")
    with pytest.warns(DeprecationWarning, match=r"use client\.admin\.fair\.of_names\Z"):
        assert await fair.top_fair_keys(["hook"], 5) == await fair.of_names(["hook"], 5)
    with pytest.warns(DeprecationWarning, match=r"use client\.admin\.fair\.jobs\Z"):
        old = await fair.fair_key_jobs("hook", "a")
    assert old == await fair.jobs("hook", "a") and old.queued == 2
    # each hands its arguments on to the method of its new name, as they are
    for was, now in [
        ("fair_keys", "of"),
        ("top_fair_keys", "of_names"),
        ("fair_key_jobs", "jobs"),
    ]:
        with (
            pytest.warns(DeprecationWarning, match=rf"use client\.admin\.fair\.{now}\Z"),
            pytest.raises(TypeError, match=rf"\b{now}\(\) got an unexpected keyword argument"),
        ):
            await getattr(fair, was)(not_an_argument=1)


@pytest.mark.one_shard("the keys' turns are taken on one shard")
async def test_the_keys_listed_are_those_with_the_most_jobs_whatever_their_backlogs(
    client: Client,
) -> None:
    # A fetch does not lower a key's backlog (the length of its list at its last push):
    # twenty keys of ten jobs, each taken down to two, still read 10; a key of eight
    # pushed since reads 8. Listed by what their lists hold, the late key comes first,
    # with its count, though twenty backlogs rank above it (the read goes on past them).
    await _keyed(client, {f"k{i:02d}": 10 for i in range(20)})
    assert len(await _lease(client, "k00", 160)) == 160
    await _keyed(client, {"late": 8})
    rows = await client.admin.fair.of("hook", top=3)
    assert [(r.key, r.queued) for r in rows] == [("late", 8), ("k00", 2), ("k01", 2)]
    by_name = await client.admin.fair.of_names(["hook"], 3)
    assert [(r.key, r.queued) for r in by_name["hook"]] == [("late", 8), ("k00", 2), ("k01", 2)]


@pytest.mark.one_shard("the keys' turns are taken and counted on one shard")
async def test_the_scrapes_read_of_drained_keys_stays_bounded_by_its_top(
    client: Client, redis_sync: redis.Redis
) -> None:
    # A hundred keys drained from 5 jobs to 1 all keep a backlog of 5: the read of one
    # name counts every list to be exact; the scrape's read of many stops at
    # SCRAPE_WIDEST times its top a name, so that a scrape costs the same however many
    # keys were drained (three commands a key read, one ZREVRANGE a round).
    await _keyed(client, {f"k{i:03d}": 5 for i in range(100)})
    assert len(await _lease(client, "k000", 400)) == 400
    redis_sync.config_resetstat()
    rows = (await client.admin.fair.of_names(["hook"], 3))["hook"]
    stats = redis_sync.info("commandstats")
    calls = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_config|resetstat")
    assert [r.queued for r in rows] == [1, 1, 1]
    assert calls <= 3 * SCRAPE_WIDEST * 3 + 4 * 3, calls
    assert [r.queued for r in await client.admin.fair.of("hook", top=3)] == [1, 1, 1]
