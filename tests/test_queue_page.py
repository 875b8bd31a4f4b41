"""The queues' page with thousands of names: the busiest first, their counts read by one
call of the read-only function ``backlog`` where the server runs functions, else in one
batch on the bare connection (redis-py's pipeline took 200 ms for 5,000 names): the
queues' lengths only where an EXISTS of 100 finds some, the running sets only of the names
that may hold leases."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from rota import Client, JobSpec


@pytest.mark.parametrize("functions", [True, False], ids=["function", "commands"])
async def test_the_busiest_come_first_from_one_batch_of_counts(
    client: Client, monkeypatch: pytest.MonkeyPatch, functions: bool
) -> None:
    names = [f"n{i:04d}" for i in range(5000)]
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.names, *names)
    await client.enqueue_many([JobSpec(name=n) for n in ("n4000", "n4000", "n4000", "n0100")])
    # running only, nothing queued: busy all the same (its leases, and its name among
    # the names that may hold leases, as a fetch leaves them)
    await client.admin.shards[0].redis.zadd(
        client.admin.shards[0].keys.running("n2000"), {"a": 1, "b": 2}
    )
    await client.admin.shards[0].redis.sadd(client.admin.shards[0].keys.leased, "n2000")
    batches: list[int] = []
    many = client.admin.shards[0].conn.execute_many

    async def counted(commands: Iterable[Sequence[Any]]) -> list[Any]:
        commands = list(commands)
        batches.append(len(commands))
        return await many(commands)

    monkeypatch.setattr(client.admin.shards[0].conn, "execute_many", counted)
    if not functions:  # as on a server without functions (Redis 6.2)
        monkeypatch.setattr(client.admin.shards[0].scope.mode, "functions", False)
    total, page = await client.admin.queue_page(0, 5)
    assert total == 5000
    assert [q.name for q in page] == ["n4000", "n2000", "n0100", "n0000", "n0001"]
    # the names that may hold leases and an EXISTS of the queues and one of the keyed
    # counts of each 100 names, at once; then the queue's length of each name of the two
    # groups of 100 where queues hold jobs and the running count of the one name that
    # may hold leases (no keyed count: no name has keyed jobs), at once
    if functions:
        # every name counted by the function: what is sent in batches is the page's
        # five names' figures, no command a name
        assert batches and max(batches) < 100, batches
    else:
        assert batches[:2] == [1 + 50 + 50, 200 + 1]
