"""Limits that follow the work over K shards of one real Redis (rota.client.balance): a
limit of n is reached wherever its jobs wait, never exceeded, and below K allowed; a
pass cut short anywhere never lets the parts add up to more than n."""

from __future__ import annotations

import asyncio
import uuid
from itertools import accumulate
from typing import Any, cast

import anyio
import redis
from anyio.abc import TaskStatus
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from structlog.testing import capture_logs

from rota import Client, JobContext, JobSpec, WorkerPool
from rota.client.balance import Pass, Seen, balance, lead, plan, read_totals
from rota.protocol.keys import Keys
from rota.protocol.rate import Rate
from rota.protocol.shards import new_id_in
from tests.helpers import pool_settings, wait_until
from tests.unit.test_shard_tags import K

NAME = "capped"


class Ledger:
    """Starts (+1) and finishes (-1) of a handler's jobs, in order; the handler waits on
    ``gate`` between them."""

    def __init__(self) -> None:
        self.events: list[int] = []
        self.gate = anyio.Event()

    @property
    def running(self) -> int:
        return sum(self.events)

    @property
    def most(self) -> int:
        return max(accumulate(self.events), default=0)

    @property
    def done(self) -> int:
        return self.events.count(-1)

    async def run(self, ctx: JobContext) -> None:
        self.events.append(1)
        await self.gate.wait()
        self.events.append(-1)


def _pool(redis_url: str, namespace: str, ledger: Ledger, limit: int) -> WorkerPool:
    settings = pool_settings(
        redis_url, namespace, shards=K, concurrency=20, heartbeat_interval=0.1, lease=5
    )
    pool = WorkerPool(settings=settings)
    pool.job(name=NAME, max_concurrency=limit)(ledger.run)
    return pool


def _parts(redis_sync: redis.Redis, namespace: str) -> list[Any]:
    return [redis_sync.hget(Keys(namespace, i, K).limits, NAME) for i in range(K)]


def _in_shard(shard: int, count: int) -> list[JobSpec]:
    return [JobSpec(name=NAME, job_id=new_id_in(shard, K)) for _ in range(count)]


async def test_a_limit_reaches_n_when_every_job_waits_in_one_shard(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    ledger = Ledger()
    async with Client.from_url(redis_url, namespace, shards=K) as client:
        await client.enqueue_many(_in_shard(2, 12))
        async with _pool(redis_url, namespace, ledger, 4).running():
            await wait_until(lambda: ledger.running == 4, within=20)
            # The whole limit sits in shard 2 now: its fetches are what keeps it at 4.
            await wait_until(lambda: _parts(redis_sync, namespace) == [b"0", b"0", b"4", b"0"])
            ledger.gate.set()
            await wait_until(lambda: ledger.done == 12, within=20)
    assert ledger.most == 4


async def test_a_limit_below_the_shard_count_is_allowed_and_holds(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    ledger = Ledger()
    async with Client.from_url(redis_url, namespace, shards=K) as client:
        await client.enqueue_many([JobSpec(name=NAME) for _ in range(20)])
        async with _pool(redis_url, namespace, ledger, 2).running():
            await wait_until(lambda: ledger.running == 2, within=20)
            parts = _parts(redis_sync, namespace)
            assert sum(int(p or 0) for p in parts) == 2
            ledger.gate.set()
            await wait_until(lambda: ledger.done == 20, within=20)
        await client.admin.set_limit(NAME, 1)  # an operator's limit below K too
        assert [q.limit for q in await client.admin.queues([NAME])] == [1]
    assert ledger.most == 2


async def test_the_limit_follows_jobs_from_one_shard_to_another(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    first, then = Ledger(), Ledger()
    which = {"now": first}

    async def run(ctx: JobContext) -> None:
        await which["now"].run(ctx)

    settings = pool_settings(
        redis_url, namespace, shards=K, concurrency=20, heartbeat_interval=0.1, lease=5
    )
    pool = WorkerPool(settings=settings)
    pool.job(name=NAME, max_concurrency=4)(run)
    async with Client.from_url(redis_url, namespace, shards=K) as client, pool.running():
        await client.enqueue_many(_in_shard(1, 8))
        await wait_until(lambda: first.running == 4, within=20)
        first.gate.set()
        await wait_until(lambda: first.done == 8, within=20)
        which["now"] = then
        await client.enqueue_many(_in_shard(3, 8))
        await wait_until(lambda: then.running == 4, within=20)
        await wait_until(lambda: _parts(redis_sync, namespace)[3] == b"4")
        then.gate.set()
        await wait_until(lambda: then.done == 8, within=20)
    assert first.most == 4
    assert then.most == 4


async def test_a_job_in_a_shard_without_a_part_starts_after_passes_skipped_while_idle(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """The holder skips its passes while nothing of a limited name waits or runs
    (rota.worker.rebalance); a job enqueued then in a shard whose part is 0 is seen by
    the next check, and the pass that follows gives that shard the part."""
    ledger = Ledger()
    ledger.gate.set()
    pool = _pool(redis_url, namespace, ledger, 1)
    async with Client.from_url(redis_url, namespace, shards=K) as client, pool.running():
        run = pool.current_run
        assert run is not None
        await wait_until(lambda: run.rebalancer.skipped >= 2, within=20)
        assert _parts(redis_sync, namespace) == [b"1", b"0", b"0", b"0"]
        await client.enqueue_many(_in_shard(3, 2))
        await wait_until(lambda: ledger.done == 2, within=20)
    assert ledger.most == 1


async def test_garbage_in_a_part_counts_as_zero_and_is_written_back_clean(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    keys = [Keys(namespace, i, K) for i in range(K)]
    for k, held in zip(keys, ["text", "nan", "-3", "1e300"], strict=True):
        redis_sync.hset(k.limits, NAME, held)
    redis_sync.hset(keys[0].limit_totals, NAME, 4)
    redis_sync.hset(keys[0].limit_totals, "other", "lots")
    async with Client.from_url(redis_url, namespace, shards=K) as client:
        scopes = [s.scope for s in client.admin.shards]
        with capture_logs() as logs:
            number = await lead(scopes[0], "test", 5000)
            assert await balance(scopes, number, {NAME: 4})
            assert await read_totals(scopes[0]) == {NAME: 4}
    parts = _parts(redis_sync, namespace)
    assert all(p is not None and p.isdigit() for p in parts)
    assert sum(int(p or 0) for p in parts) == 4
    counted = [e for e in logs if "counted as 0" in e["event"]]
    assert sorted(e["held"] for e in counted) == ["-3", "1e300", "nan", "text"]
    assert any("left out" in e["event"] and e["name"] == b"other" for e in logs)


async def test_a_rate_follows_its_jobs_and_shows_whole(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """Jobs of a rate-limited name in one shard get the whole rate there (no more r / K);
    the operator sees the whole rate, and garbage in a part counts as 0."""
    ledger = Ledger()
    ledger.gate.set()
    settings = pool_settings(
        redis_url, namespace, shards=K, concurrency=20, heartbeat_interval=0.1, lease=5
    )
    pool = WorkerPool(settings=settings)
    pool.job(name=NAME, rate="40/s")(ledger.run)
    rates = [Keys(namespace, i, K).rates for i in range(K)]
    async with Client.from_url(redis_url, namespace, shards=K) as client, pool.running():
        await client.enqueue_many(_in_shard(2, 400))
        want = [b"0/1000", b"0/1000", b"40/1000", b"0/1000"]
        await wait_until(lambda: [redis_sync.hget(k, NAME) for k in rates] == want)
        assert [q.rate for q in await client.admin.queues([NAME])] == ["40/s"]
        with capture_logs() as logs:
            redis_sync.hset(rates[0], NAME, "many/1000")
            await wait_until(lambda: redis_sync.hget(rates[0], NAME) == b"0/1000")
        await client.admin.set_rate(NAME, "20/s")
        assert [q.rate for q in await client.admin.queues([NAME])] == ["20/s"]
        shares = [redis_sync.hget(k, NAME) for k in rates]
        assert sum(float(cast(bytes, x).split(b"/")[0]) for x in shares) <= 20
    assert any(e["event"] == "rate part is no rate: counted as 0" for e in logs)


async def test_another_pool_takes_the_lease_when_the_holder_stops(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    ledger = Ledger()
    first, second = (_pool(redis_url, namespace, ledger, 4) for _ in range(2))
    lease = Keys(namespace).rebalancer
    stop_first = anyio.Event()

    async def run_first(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with first.running():
            task_status.started()
            await stop_first.wait()

    client = Client.from_url(redis_url, namespace, shards=K)
    async with client, anyio.create_task_group() as tg:
        await tg.start(run_first)
        await wait_until(lambda: redis_sync.get(lease) is not None)
        held = cast(bytes, redis_sync.get(lease))  # the first pool's, the first lease
        async with second.running():
            stop_first.set()  # it gives the lease up on its way out
            await wait_until(lambda: redis_sync.get(lease) not in (None, held))
            assert cast(bytes, redis_sync.get(lease)).endswith(b" 2")
            await client.enqueue_many(_in_shard(3, 8))
            await wait_until(lambda: ledger.running == 4, within=20)
            await wait_until(lambda: _parts(redis_sync, namespace)[3] == b"4")
            ledger.gate.set()
            await wait_until(lambda: ledger.done == 8, within=20)
    assert held.endswith(b" 1")
    assert ledger.most == 4


async def test_a_count_of_leases_shard_0_lost_is_found_again(
    redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """Shard 0 forgot its count of leases (restarted without persistence) while the
    other shards remember lease 50: the first pass is fenced off, the count goes past
    50, and the next lease passes."""
    for i in range(K):
        redis_sync.set(Keys(namespace, i, K).rebalance_fence, 50)
    ledger = Ledger()
    async with Client.from_url(redis_url, namespace, shards=K) as client:
        await client.enqueue_many(_in_shard(1, 8))
        async with _pool(redis_url, namespace, ledger, 4).running():
            await wait_until(lambda: ledger.running == 4, within=20)
            lease = cast(bytes, redis_sync.get(Keys(namespace).rebalancer))
            ledger.gate.set()
            await wait_until(lambda: ledger.done == 8, within=20)
    assert lease.endswith(b" 51")
    assert ledger.most == 4


@given(
    limit=st.integers(1, 60),
    shards=st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 50), st.booleans()), min_size=1, max_size=9
    ),
)
def test_targets_keep_what_runs_and_add_up_to_the_limit(
    limit: int, shards: list[tuple[int, int, bool]]
) -> None:
    seen = [Seen(0 if has else None, running, waiting) for running, waiting, has in shards]
    targets = plan(limit, seen)
    live = [i for i, s in enumerate(seen) if s.part is not None]
    assert all(targets[i] >= seen[i].running for i in live)
    assert all(targets[i] == 0 for i in range(len(seen)) if i not in live)
    if live and sum(seen[i].running for i in live) <= limit:
        assert sum(targets) == limit


def test_plan_adds_up_to_the_limit_and_keeps_what_runs() -> None:
    seen = [Seen(0, 1, 0), Seen(0, 0, 30), Seen(0, 0, 10), Seen(None, 3, 5)]
    assert plan(9, seen) == [1, 6, 2, 0]
    assert plan(1, [Seen(1, 2, 0), Seen(0, 0, 4)]) == [2, 0]  # what runs stays
    assert plan(6, [Seen(0, 0, 0)] * 4) == [2, 2, 1, 1]


def test_parts_never_add_up_to_more_than_the_limit(redis_url: str) -> None:
    """A state machine over running and waiting jobs per shard and passes stopped at any
    step (a pool killed mid-pass, whose lease another pool then takes, and which may
    come back to finish its steps): the parts never add up to more than n, and a pass
    that runs whole places exactly n."""
    loop = asyncio.new_event_loop()
    try:
        machine = type("Parts", (_Parts,), {"loop": loop, "url": redis_url})
        run_state_machine_as_test(
            machine,
            settings=hsettings(max_examples=40, stateful_step_count=30, deadline=None),
        )
    finally:
        loop.close()


class _Parts(RuleBasedStateMachine):
    loop: asyncio.AbstractEventLoop  # set by the test, with the server's address
    url: str

    def __init__(self) -> None:
        super().__init__()
        redis_url = self.url
        self.ns = "t" + uuid.uuid4().hex[:12]
        self.client = Client.from_url(redis_url, self.ns, shards=K)
        self.scopes = [s.scope for s in self.client.admin.shards]
        self.keys = [Keys(self.ns, i, K) for i in range(K)]
        self.r = redis.Redis.from_url(redis_url)
        self.limit, self.rate = 5, Rate(7.0, 1000)
        self.r.hset(self.keys[0].limit_totals, NAME, self.limit)
        self.r.hset(self.keys[0].rate_totals, NAME, self.rate.stored)
        for k in self.keys:
            self.r.hset(k.limits, NAME, 0)
            self.r.hset(k.rates, NAME, "0/1000")
        self.passes: list[tuple[Pass, str]] = []  # started passes and their next step
        self.jobs = 0

    def teardown(self) -> None:
        self.do(self.client.close())
        self.r.close()

    def do(self, aw: Any) -> Any:
        return self.loop.run_until_complete(aw)

    def part(self, i: int) -> int:
        return int(self.r.hget(self.keys[i].limits, NAME) or 0)

    def share(self, i: int) -> float:
        count, _, per = cast(bytes, self.r.hget(self.keys[i].rates, NAME)).partition(b"/")
        assert per == b"1000"
        return float(count)

    def running(self, i: int) -> int:
        return int(self.r.zcard(self.keys[i].running(NAME)))

    @rule(i=st.integers(0, K - 1), n=st.integers(1, 6))
    def enqueue(self, i: int, n: int) -> None:
        self.r.lpush(self.keys[i].queue(NAME), *[f"j{self.jobs + x}" for x in range(n)])
        self.jobs += n

    @rule(i=st.integers(0, K - 1))
    def start(self, i: int) -> None:
        """What a fetch does: take a waiting job while the shard's part leaves room."""
        if self.running(i) < self.part(i) and (job := self.r.rpop(self.keys[i].queue(NAME))):
            self.r.zadd(self.keys[i].running(NAME), {cast(bytes, job): 1})

    @rule(i=st.integers(0, K - 1))
    def finish(self, i: int) -> None:
        self.r.zpopmin(self.keys[i].running(NAME))

    @rule(new_pool=st.booleans())
    def begin(self, new_pool: bool) -> None:
        """A pass starts: by the lease's holder, or by another pool once the lease of
        the one before ran out (it was killed, or stopped mid-pass)."""
        if new_pool:
            self.r.delete(self.keys[0].rebalancer)
        number = self.do(lead(self.scopes[0], f"pool-{len(self.passes)}", 60000))
        if not number:
            return
        step = Pass(self.scopes, number, {NAME: self.limit}, {NAME: self.rate})
        self.passes.append((step, "lower" if self.do(step.read()) else "done"))

    @rule(which=st.integers(0, 5))
    def advance(self, which: int) -> None:
        """One step of a started pass, a live one or one left behind."""
        if not self.passes:
            return
        at = which % len(self.passes)
        step, nxt = self.passes[at]
        if nxt == "lower":
            self.do(step.lower())
            self.passes[at] = (step, "grow")
        elif nxt == "grow":
            self.do(step.grow())
            self.passes[at] = (step, "done")

    @rule()
    def whole_pass(self) -> None:
        """A pass that runs to its end with nothing between its steps places n."""
        self.r.delete(self.keys[0].rebalancer)
        number = self.do(lead(self.scopes[0], "whole", 60000))
        assert self.do(balance(self.scopes, number, {NAME: self.limit}, {NAME: self.rate}))
        if sum(self.running(i) for i in range(K)) <= self.limit:
            assert sum(self.part(i) for i in range(K)) == self.limit
        assert sum(self.share(i) for i in range(K)) > self.rate.count - 1e-5

    @invariant()
    def never_more_than_the_limit(self) -> None:
        assert sum(self.part(i) for i in range(K)) <= self.limit
        assert sum(self.running(i) for i in range(K)) <= self.limit
        assert sum(self.share(i) for i in range(K)) <= self.rate.count
        for i in range(K):
            assert self.part(i) >= 0
            assert self.share(i) >= 0
