"""Fair keys' turns under any mix of keys, plain jobs and fetch sizes, taken by the fetch
script itself: every job leased once, FIFO within a key, and round robin, no key (nor
the plain list) ever two turns ahead of one that still has jobs; the sets a fetch keeps
(ready keys, backlogs, the name's count) follow the lists after every call.

A name without settings takes its turns by the plans of ``lua/_fairfast.lua``, one with
a setting (a weight of 1 here, which changes no turn) by ``lua/_fairfetch.lua``: the
same properties hold for both. Fetches that fill from two names (``fill``) make a call
plan more jobs of a name than it leases, which go back to their keys."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rota import Client, JobSpec
from rota.client.shard import Shard
from rota.protocol import calls
from rota.protocol.job import reply_text
from tests.redis_server import RedisServer

PARTICIPANTS = [None, "k0", "k1", "k2", "k3", "k4"]  # None: a job without a key

GROUPS = st.lists(
    st.tuples(st.sampled_from(PARTICIPANTS), st.integers(1, 6)), min_size=1, max_size=12
)
FETCHES = st.lists(st.tuples(st.sampled_from(["a", "b", "both", "fill"]), st.integers(1, 12)))


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=GROUPS,
    b=GROUPS,
    fetches=FETCHES,
    weighted=st.booleans(),
)
def test_turns_lease_once_in_order_and_round_robin(
    redis_url: str,
    a: list[tuple[str | None, int]],
    b: list[tuple[str | None, int]],
    fetches: list[tuple[str, int]],
    weighted: bool,
) -> None:
    anyio.run(_turns, redis_url, {"a": a, "b": b}, fetches, weighted)


async def _turns(
    redis_url: str,
    groups: dict[str, list[tuple[str | None, int]]],
    fetches: list[tuple[str, int]],
    weighted: bool,
) -> None:
    async with Client.from_url(redis_url, "t" + uuid.uuid4().hex[:12], shards=1) as client:
        shard = client.admin.shards[0]
        made: dict[str, tuple[str, str | None, int]] = {}  # id -> name, key, seq
        for name, spec in groups.items():
            specs: list[JobSpec] = []
            seqs: Counter[str | None] = Counter()
            for key, count in spec:
                for _ in range(count):
                    job_id = f"{name}{len(made):04d}"
                    made[job_id] = (name, key, seqs[key])
                    seqs[key] += 1
                    specs.append(JobSpec(name=name, fair_key=key, job_id=job_id))
            if weighted and any(k for k, _ in spec):
                await client.admin.fair.set_weight(name, next(k for k, _ in spec if k), 1)
            await client.enqueue_many(specs)
        lessee = calls.Lessee(600_000, "turns", 1 << 20)
        taken: dict[str, list[str]] = {"a": [], "b": []}

        async def fetch(names: list[str], fill: list[str]) -> int:
            reply = await calls.fetch(shard.scope, lessee, names, fill)
            for job in reply.jobs:
                taken[job.name].append(job.id)
            await _sets_follow_lists(shard, groups, made, taken, weighted)
            return len(reply.jobs)

        for kind, size in fetches:
            if kind == "fill":  # an empty name fails each slot: the fill takes them
                await fetch(["none"] * size, ["a", "b"])
            elif kind == "both":
                await fetch(["a"] * size + ["b"] * size, [])
            else:
                await fetch([kind] * size, [])
        while await fetch(["a"] * 7 + ["b"] * 5, ["a", "b"]):
            pass
        for name in groups:  # the last call found every key left empty: none is kept
            assert (
                await shard.redis.exists(shard.keys.fair_keys(name), shard.keys.fair_backlog(name))
                == 0
            )
        for name in groups:
            try:
                _check_turns(name, [made[i] for i in taken[name]], made)
            except AssertionError as e:
                raise AssertionError(f"{groups} {fetches} {weighted}: {e}") from None


Made = dict[str, tuple[str, str | None, int]]  # job id -> its name, key and seq


def _check_turns(name: str, order: list[tuple[str, str | None, int]], made: Made) -> None:
    queued = Counter(key for n, key, _ in made.values() if n == name)
    assert Counter(key for _, key, _ in order) == queued, "each job leased exactly once"
    seen: Counter[str | None] = Counter()
    left = Counter(queued)
    for _, key, seq in order:
        assert seq == seen[key], f"{name}: {key}'s jobs out of order"
        seen[key] += 1
        left[key] -= 1
        for other in queued:
            if other != key and left[other] > 0:
                assert seen[key] <= seen[other] + 1, (
                    f"{name}: {key} two turns ahead of {other}, which still had jobs: {order}"
                )


async def _sets_follow_lists(
    shard: Shard,
    groups: dict[str, list[tuple[str | None, int]]],
    made: Made,
    taken: dict[str, list[str]],
    weighted: bool,
) -> None:
    """After a call: every key with jobs is among the ready keys, with a backlog of at
    least its list's length (the length at its last push: docs/protocol.md; exactly it
    for a name with settings, whose fetch keeps it); the name's count is its keyed jobs
    queued."""
    k, r = shard.keys, shard.redis
    for name in groups:
        done = set(taken[name])
        queued = Counter(
            key for i, (n, key, _) in made.items() if n == name and key and i not in done
        )
        keys = sorted({key for n, key, _ in made.values() if n == name and key})
        lengths = {key: await r.llen(k.fair_queue(name, key)) for key in keys}
        assert {key: n for key, n in lengths.items() if n} == dict(queued)
        rows: list[Any] = await r.zrange(k.fair_backlog(name), 0, -1, withscores=True)
        backlog = {reply_text(x): int(s) for x, s in rows}
        members: list[Any] = await r.zrange(k.fair_keys(name), 0, -1)
        ready = {reply_text(x) for x in members}
        if weighted:
            assert backlog == dict(queued), f"{name}: backlogs"
            assert ready == set(queued), f"{name}: ready keys"
        else:
            assert all(backlog.get(key, 0) >= n for key, n in queued.items()), name
            assert ready >= set(queued), f"{name}: ready keys"
        count = await r.hget(k.fair(name), "n")
        assert int(count or 0) == sum(queued.values()), f"{name}: keyed jobs queued"


async def test_what_a_call_plans_and_does_not_lease_goes_back_with_its_turns() -> None:
    """A fill over two names plans six jobs of ``a`` and leases three: the three go back
    to the front of their keys, and the keys keep the turns they did not take."""
    with RedisServer() as server:
        async with Client.from_url(server.url, "t" + uuid.uuid4().hex[:12], shards=1) as client:
            shard = client.admin.shards[0]
            await client.enqueue_many(
                [JobSpec(name="a", fair_key=f"k{i % 2}", job_id=f"a{i:02d}") for i in range(10)]
                + [JobSpec(name="b", job_id=f"b{i:02d}") for i in range(5)]
            )
            lessee = calls.Lessee(600_000, "turns", 1 << 20)
            first = await calls.fetch(shard.scope, lessee, ["none"] * 6, ["a", "b"])
            assert [j.id for j in first.jobs] == ["a00", "b00", "a01", "b01", "a02", "b02"]
            times = await shard.redis.zrange(shard.keys.fair_keys("a"), 0, -1, withscores=True)
            assert times == [(b"k1", 1.0), (b"k0", 2.0)]  # k1 took one turn, k0 two
            rest = await calls.fetch(shard.scope, lessee, ["a"] * 10, [])
            assert [j.id for j in rest.jobs] == [f"a{i:02d}" for i in range(3, 10)]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    jobs=st.lists(st.integers(1, 4), min_size=1, max_size=40),
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=6),
    count=st.sampled_from(["0", "x", "nan", "-5", "1"]),
)
def test_a_count_of_keyed_jobs_that_reads_wrong_changes_no_turn(
    redis_url: str, jobs: list[int], sizes: list[int], count: str
) -> None:
    """A name without settings pops the keys its count of keyed jobs (``fair:<name>``
    ``n``) says are mostly empty several a command (``LMPOP``): a count written wrong by
    hand costs commands, never a job nor a turn. The same jobs leave in the same order
    as from a name whose count is right."""
    anyio.run(_wrong_count, redis_url, jobs, sizes, count)


async def _wrong_count(redis_url: str, jobs: list[int], sizes: list[int], count: str) -> None:
    orders: list[list[str]] = []
    for wrong in (False, True):
        async with Client.from_url(redis_url, "t" + uuid.uuid4().hex[:12], shards=1) as client:
            shard = client.admin.shards[0]
            specs = [
                JobSpec(name="a", fair_key=f"k{key:02d}", job_id=f"j{key:02d}-{i}")
                for key, n in enumerate(jobs)
                for i in range(n)
            ]
            await client.enqueue_many(specs)
            lessee = calls.Lessee(600_000, "turns", 1 << 20)
            order: list[str] = []
            for size in [*sizes, *[20] * sum(jobs)]:
                if wrong:  # written again before every call: the fetch writes it back
                    await shard.redis.hset(shard.keys.fair("a"), "n", count)
                reply = await calls.fetch(shard.scope, lessee, ["a"] * size, [])
                order += [job.id for job in reply.jobs]
                if not reply.jobs and len(order) == len(specs):
                    break
            assert sorted(order) == sorted(s.job_id for s in specs if s.job_id)
            orders.append(order)
    assert orders[0] == orders[1]
