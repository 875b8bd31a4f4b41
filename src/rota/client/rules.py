"""What holds for every shard of a namespace, beside :mod:`rota.client.routing`: the
shard count a namespace records, the split of limits and rates between its shards, one
call run on each shard at once, and how their figures add up."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import structlog

from rota.client.status import Bucket, QueueInfo
from rota.errors import ConfigError
from rota.protocol.keys import Keys
from rota.protocol.rate import Rate
from rota.protocol.reshard import BadRecord, ShardRecord, parse_record
from rota.wire.redispy import REDIS_ERRORS, Redis, wrong_type

__all__ = [
    "add_counts",
    "check_shards",
    "gather",
    "merge_bucket",
    "merge_queue",
    "recorded_shards",
]

T = TypeVar("T")

log = structlog.get_logger("rota.shards")


async def recorded_shards(redis: Redis, keys: Keys) -> int | None:
    """How many shards a namespace spans, as its first pool or its last change recorded
    it (the new count while a change is under way; None: no pool of several shards has
    run yet, or the record names no count: see :func:`_stored_record`). Operators'
    tools (the CLI, the web) follow it, whatever their own settings say."""
    record, _malformed = await _stored_record(redis, keys)
    return None if record is None else record.new


async def _stored_record(redis: Redis, keys: Keys) -> tuple[ShardRecord | None, bytes | None]:
    """The recorded shard count (see :mod:`rota.protocol.reshard`), and what the record
    holds when it names none (text, 0, a count past MAX_SHARDS, a key of another type:
    ``b"<type>"``), written by hand or by another program: no count can be read from
    it, and none is made up."""
    try:
        stored = await redis.get(keys.shards)
    except REDIS_ERRORS as exc:
        if not wrong_type(exc):
            raise
        return None, b"<" + _raw(await redis.type(keys.shards)) + b">"
    if not stored:
        return None, None
    try:
        return parse_record(stored, keys.shards), None
    except BadRecord:
        return None, _raw(stored)


def _raw(reply: bytes | str) -> bytes:
    return reply if isinstance(reply, bytes) else reply.encode()


async def check_shards(redis: Redis, keys: Keys, shards: int) -> ShardRecord | None:
    """Refuse to serve a namespace that spans another number of shards than ``shards``
    (a pool configured with another count would leave shards unserved, or route jobs
    where no pool looks): the first pool with more than one shard records its count. A
    record that names no count is moved to its quarantine key, with one warning line,
    and the pool records its own count as the first pool would: a pool refusing to
    start for it would leave the namespace to no pool at all. A namespace whose count
    was changed online (``rota shards resize``: a record with a generation) is served
    as the record says, whatever ``shards`` is: its record, which the pool follows."""
    record, malformed = await _stored_record(redis, keys)
    if malformed is not None:
        moved = keys.quarantine("shards")
        if await redis.exists(moved):
            moved += f":{time.time_ns() // 1000}"
        await redis.rename(keys.shards, moved)
        log.warning(
            "shard count record names no count: moved to its quarantine key",
            key=keys.shards,
            held=malformed[:64].decode("utf-8", "replace"),
            moved_to=moved,
            shards=shards,
        )
    if record is not None and (record.generation or record.changing):
        return record
    count = None if record is None else record.new
    if count is None and shards > 1 and not await redis.set(keys.shards, shards, nx=True):
        count = await recorded_shards(redis, keys)  # another pool recorded it meanwhile
    recorded = count or (shards if shards > 1 else 1)
    if recorded != shards:
        raise ConfigError(
            f"shards: namespace {keys.namespace!r} spans {recorded} shard(s), this pool is"
            f" configured with {shards}: use shards = {recorded}, or change the count"
            " with 'rota shards resize' (see 'Changing the shard count' in"
            " docs/operations.md)"
        )
    return None


async def gather(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``calls`` at once; their results in order. An error of one comes out as
    itself (the first, if several fail), as the same call on one shard would raise it."""
    if len(calls) == 1:
        return [await calls[0]()]
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        out[i] = await calls[i]()

    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):
                tg.start_soon(one, i)
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None
    return out


def add_counts(each: Sequence[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for counts in each:
        for key, n in counts.items():
            out[key] = out.get(key, 0) + n
    return out


def merge_bucket(buckets: Sequence[Bucket]) -> Bucket:
    return Bucket(buckets[0].start, add_counts([b.counts for b in buckets]))


def merge_queue(
    rows: Sequence[QueueInfo],
    shards: int,
    limits: Mapping[str, int] | None = None,
    rates: Mapping[str, Rate] | None = None,
) -> QueueInfo:
    """One name's figures over every shard: sizes add up, the oldest job is the oldest
    of all; the limit and the rate are the wholes shard 0 keeps (``limits``, ``rates``:
    rota.client.balance), else the shards' parts together."""
    first = rows[0]
    parts = [r.limit for r in rows if r.limit is not None]
    limit = (limits or {}).get(first.name, sum(parts) if parts else None)
    rate = (rates or {}).get(first.name)
    return QueueInfo(
        first.name,
        sum(r.size for r in rows),
        max(r.latency for r in rows),
        sum(r.running for r in rows),
        limit,
        any(r.paused for r in rows),
        next((r.priority for r in rows if r.priority is not None), None),
        str(rate) if rate else first.rate and _times(first.rate, shards),
    )


def _times(rate: str, shards: int) -> str:
    """A shard's rate as read (``"25/s"``, ``"2.5/1500ms"``) times ``shards``."""
    count, _, per = rate.partition("/")
    total = float(count) * shards
    return f"{int(total) if total == int(total) else total!r}/{per}"
