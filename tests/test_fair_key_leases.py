"""Fair keys: a key's running set is kept only while a limit reaches the key. A key
without one makes none per job (nor marks its jobs `flease`), its running count read
from the name's running set; a limit set while its jobs run counts them at once."""

from __future__ import annotations

import pytest
import redis

from rota import Client, JobSpec
from rota.protocol import calls, operator_calls
from rota.protocol.rows import Complete
from tests.helpers import lease_tokens

pytestmark = pytest.mark.one_shard("the scripts are called on one shard")


def _keyed(key: str, n: int) -> list[JobSpec]:
    return [JobSpec(name="hook", fair_key=key) for _ in range(n)]


async def _finish(client: Client, tokens: dict[str, str]) -> None:
    outcomes = [Complete(i, "hook", t, "", "0", "") for i, t in tokens.items()]
    await calls.finish(client.admin.shards[0].scope, outcomes, complete_max=100)


async def test_a_key_without_a_limit_keeps_no_running_set(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    await client.enqueue_many(_keyed("a", 3))
    tokens = await lease_tokens(client, "hook", 2)
    p = "{" + namespace + "}:"
    assert not redis_sync.exists(p + "frun:hook/a")
    assert [redis_sync.hget(p + "job:" + i, "flease") for i in tokens] == [None, None]
    # its running jobs are found in the name's running set
    (row,) = await client.admin.fair.of("hook")
    assert (row.key, row.queued, row.running) == ("a", 1, 2)
    page = await client.admin.fair.jobs("hook", "a")
    assert page.running == 2 and {j.id for j in page.running_jobs} == set(tokens)
    await _finish(client, tokens)
    assert not redis_sync.exists(p + "frun:hook/a")
    assert (await client.admin.fair.jobs("hook", "a")).running == 0


@pytest.mark.parametrize("of", ["a", None])
async def test_a_limit_set_while_a_keys_jobs_run_counts_them(
    client: Client, redis_sync: redis.Redis, namespace: str, of: str | None
) -> None:
    await client.enqueue_many(_keyed("a", 6) + _keyed("b", 1))
    first = await lease_tokens(client, "hook", 4)  # a, b, a, a: no limit yet
    await client.admin.fair.set_key_limit("hook", of, 3)
    p = "{" + namespace + "}:"
    assert redis_sync.zcard(p + "frun:hook/a") == 3
    assert await lease_tokens(client, "hook", 5) == {}  # a is at its limit: none more
    a_jobs = [i for i in first if redis_sync.hget(p + "job:" + i, "fair") == b"a"]
    await _finish(client, {a_jobs[0]: first[a_jobs[0]]})  # frees one slot of a
    again = await lease_tokens(client, "hook", 5)
    assert len(again) == 1 and redis_sync.zcard(p + "frun:hook/a") == 3
    await _finish(client, {i: t for i, t in first.items() if i != a_jobs[0]} | again)
    assert redis_sync.zcard(p + "frun:hook/a") == 0
    assert len(await lease_tokens(client, "hook", 5)) == 2  # the last two of a, to its limit


async def test_recount_counts_the_running_jobs_of_a_limit_written_otherwise(
    client: Client, redis_sync: redis.Redis, namespace: str
) -> None:
    """A change of the shard count copies a key's limit into a shard by HSETNX, then asks
    for the count (client/resize.py): the key's running jobs there are counted."""
    await client.enqueue_many(_keyed("a", 4) + _keyed("b", 2))
    running = await lease_tokens(client, "hook", 5)
    p = "{" + namespace + "}:"
    redis_sync.hset(p + "fset:hook", "l*", "2")  # as a copy writes it
    scope = client.admin.shards[0].scope
    assert not redis_sync.exists(p + "frun:hook/a")
    await operator_calls.fair_key(scope, "recount", "hook", "")
    assert redis_sync.zcard(p + "frun:hook/a") == 3 and redis_sync.zcard(p + "frun:hook/b") == 2
    assert {redis_sync.hget(p + "job:" + i, "flease") for i in running} == {b"1"}
    await _finish(client, running)
    assert not redis_sync.exists(p + "frun:hook/a") and not redis_sync.exists(p + "frun:hook/b")
