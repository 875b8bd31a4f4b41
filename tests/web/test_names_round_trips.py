"""What ``/shards`` and ``/metrics?run_times=`` cost the web server as the job names grow
from 50 to 500, counted on a private server, never in time: the bytes Redis read from
its clients (``INFO stats``: what the reader sent, after ``CONFIG RESETSTAT``) and the
writes the reader made (each a round trip: a command or a pipeline), over one shard and
over four on one server.

A shard's view counts every name's jobs in one call of the read-only function
``backlog``: what it sends names no job name, where it sent an ``LLEN`` a name (and read
the names first). A scrape with run times reads every detailed name's slots in one
round trip per shard, where it took one per name and shard (100 a shard at 100 names),
and the day's 145 slots of a name come back added up, a short row a name and shard.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import redis
from redis.asyncio.connection import AbstractConnection

from rota import Client, JobSpec
from rota.protocol.run_times import slot_of
from rota.web import create_app
from rota.wire.resp import Wire
from tests.helpers import pool_settings

Served = tuple[Client, httpx.AsyncClient]


@pytest.fixture(params=[1, 4], ids=["K=1", "K=4"])
async def served(
    request: pytest.FixtureRequest, redis_url: str, namespace: str
) -> AsyncIterator[Served]:
    """The web UI over ``K`` shards on one server, no job yet."""
    shards: int = request.param
    client = Client.from_url(redis_url, namespace, shards=shards)
    app = create_app(pool_settings(redis_url, namespace, shards=shards), client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield client, http
    await client.close()


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A count of the writes of every connection to a server, redis-py's and the bare
    ones' (:class:`rota.wire.resp.Wire`): one a command or a pipeline, a round trip
    each (the server answers unchanged)."""
    count = [0]
    packed = AbstractConnection.send_packed_command
    send = Wire.send

    async def counted_packed(self: AbstractConnection, *args: Any, **kwargs: Any) -> None:
        count[0] += 1
        await packed(self, *args, **kwargs)

    def counted_send(self: Wire, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted_packed)
    monkeypatch.setattr(Wire, "send", counted_send)
    return count


async def _names(client: Client, start: int, stop: int) -> None:
    """A job of each of the names ``n<start>`` .. ``n<stop - 1>``, and a keyed one of
    every tenth."""
    await client.enqueue_many([JobSpec(name=f"n{i:04d}") for i in range(start, stop)])
    keyed = [JobSpec(name=f"n{i:04d}", fair_key="acme") for i in range(start, stop, 10)]
    await client.enqueue_many(keyed)


def _bytes_read(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("stats")
    return int(stats["total_net_input_bytes"])


def _bytes_answered(r: redis.Redis) -> int:
    """What Redis sent its clients since ``CONFIG RESETSTAT`` (the INFO reply asking
    it is sent after it is counted)."""
    stats: dict[str, Any] = r.info("stats")
    return int(stats["total_net_output_bytes"])


async def test_the_shards_view_sends_no_more_as_the_names_grow(
    served: Served, redis_sync: redis.Redis, writes: list[int]
) -> None:
    client, http = served
    sent, trips, stop = [], [], 0
    for start, stop in ((0, 50), (50, 500)):
        await _names(client, start, stop)
        assert (await http.get("/api/shards")).status_code == 200  # connections opened
        before = writes[0]
        redis_sync.config_resetstat()
        got = await http.get("/api/shards")
        sent.append(_bytes_read(redis_sync))
        trips.append(writes[0] - before)
        assert got.status_code == 200, got.text
        shards = got.json()["shards"]
        assert sum(s["queued"] for s in shards) == stop + stop // 10
    # one pipeline of the sets' sizes and one call a shard, the same bytes at 50 names
    # and at 500 (it was an LLEN a name: 15 KB more at 500)
    assert trips[0] == trips[1] <= 2 * len(client.admin.shards), trips
    assert abs(sent[1] - sent[0]) < 100, sent


async def test_a_scrape_reads_the_run_times_of_its_names_in_a_round_trip_a_shard(
    served: Served, redis_sync: redis.Redis, writes: list[int]
) -> None:
    client, http = served
    shard = client.admin.shards[0]
    costs, answered = [], []
    for start, stop in ((0, 50), (50, 500)):
        await _names(client, start, stop)
        slot = shard.keys.run_times(f"n{start:04d}", slot_of_now())
        redis_sync.hset(slot, mapping={"5": 3, "9": 1})  # 4 attempts, of 6 and 39 ms
        counts, sizes = [], []
        for path in ("/metrics", "/metrics?run_times=hour", "/metrics?run_times=day"):
            await http.get(path)  # connections opened
            before = writes[0]
            redis_sync.config_resetstat()
            got = await http.get(path)
            sizes.append(_bytes_answered(redis_sync))
            counts.append(writes[0] - before)
            assert got.status_code == 200, got.text
            line = (
                f'rota_job_run_time_attempts{{name="n{start:04d}",namespace="{client.namespace}"}}'
            )
            assert path == "/metrics" or f"{line} 4.0" in got.text, got.text[-3000:]
        costs.append([c - counts[0] for c in counts[1:]])
        answered.append(sizes[2] - sizes[0])
    # 50 names detailed, then 100: it was a round trip per name and shard
    assert costs[0] == costs[1] and max(costs[0]) <= len(client.admin.shards), costs
    # the day's slots are added up in Redis: a few bytes more a name and shard, where an
    # empty reply a slot was 580 (145 slots)
    per_name = (answered[1] - answered[0]) / (50 * len(client.admin.shards))
    assert per_name < 20, answered


def slot_of_now() -> str:
    """The run-time slot of now."""
    return slot_of(datetime.fromtimestamp(time.time(), UTC))


async def test_the_run_times_of_many_names_are_each_names_own(
    served: Served, redis_sync: redis.Redis
) -> None:
    client, _ = served
    await _names(client, 0, 3)
    at = time.time()
    for i, shard in enumerate(client.admin.shards):
        redis_sync.hset(shard.keys.run_times("n0001", slot_of_now()), mapping={"2": i + 1})
    redis_sync.hset(client.admin.shards[0].keys.run_times("n0002", slot_of_now()), "x", "1")
    for window in ("hour", "day"):
        many = await client.admin.run_times.of_names(["n0000", "n0001", "n0002"], window, at=at)
        one = [
            await client.admin.run_times.of(n, window, at=at) for n in ("n0000", "n0001", "n0002")
        ]
        assert many == one
    assert [r.count for r in many] == [0, sum(range(1, len(client.admin.shards) + 1)), 0]
    with pytest.raises(ValueError, match="window: 'hour' or 'day'"):
        await client.admin.run_times.of_names(["n0000"], "week")  # type: ignore[arg-type]
