"""Args survive byte for byte: enqueue, retry and schedule never re-encode them."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rota import Client, JobContext, State, WorkerPool
from rota.protocol import codec
from tests.helpers import pool_settings, wait_until

TRICKY: dict[str, Any] = {
    "big": 2**63 - 1,
    "small": -(2**63),
    "empty_list": [],
    "empty_obj": {},
    "nested": {"a": [[], {}, [{}]], "b": None},
    "text": 'héllo wörld ✓ 日本語 🎉 \u0000 \n\t"quoted" \\',
    "float": 0.1,
}


def _raw_args(r: redis.Redis, namespace: str, job_id: str) -> bytes:
    raw = r.hget("{" + namespace + "}:job:" + job_id, "args")
    assert isinstance(raw, bytes)
    return raw


async def test_args_byte_for_byte_through_enqueue_retry_and_schedule(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    received: list[dict[str, Any]] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job(max_fails=3, backoff=lambda n: 0.05)
    async def echo(ctx: JobContext, **kwargs: Any) -> None:
        received.append(kwargs)
        if ctx.attempt == 1:
            raise RuntimeError("once more")

    expected = msgspec.json.encode(TRICKY)
    job = await client.enqueue("echo", **TRICKY)
    later = await client.enqueue_in(0.3, "echo", **TRICKY)
    assert _raw_args(redis_sync, namespace, job.id) == expected
    assert _raw_args(redis_sync, namespace, later.id) == expected
    async with pool.running():
        await wait_until(lambda: len(received) == 4, within=10)
        for jid in (job.id, later.id):
            await wait_until(partial(_complete, client, jid))
    assert _raw_args(redis_sync, namespace, job.id) == expected
    assert _raw_args(redis_sync, namespace, later.id) == expected
    assert all(kwargs == TRICKY for kwargs in received)
    assert received[0]["big"] == 2**63 - 1


async def _complete(client: Client, job_id: str) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == State.COMPLETE


async def test_foreign_json_text_reaches_the_handler_untouched(
    client: Client, redis_url: str, namespace: str, redis_sync: redis.Redis
) -> None:
    """JSON written by another language, spaced and ordered its own way, is kept as is."""
    text = b'{ "b" : [ ] , "a" : { } , "n" : 9223372036854775807 }'
    p = "{" + namespace + "}:"
    pipe = redis_sync.pipeline(transaction=True)
    pipe.hset(
        p + "job:foreign1",
        mapping={"name": "echo", "args": text, "state": "queued", "enqueued_at": 1, "attempts": 0},
    )
    pipe.lpush(p + "queue:echo", "foreign1")
    pipe.sadd(p + "names", "echo")
    pipe.lpush(p + "wake:echo", 1)
    pipe.execute()
    received: list[dict[str, Any]] = []
    pool = WorkerPool(settings=pool_settings(redis_url, namespace, keep_result=60))

    @pool.job
    async def echo(ctx: JobContext, **kwargs: Any) -> None:
        received.append(kwargs)

    async with pool.running():
        await wait_until(lambda: len(received) == 1)
        await wait_until(lambda: _complete(client, "foreign1"))
    assert received == [{"b": [], "a": {}, "n": 2**63 - 1}]
    assert _raw_args(redis_sync, namespace, "foreign1") == text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_codec_round_trips_any_json_object(kwargs: dict[str, Any]) -> None:
    raw = codec.encode_args((), kwargs)
    assert codec.decode_args(raw) == kwargs
