"""redis-py as the rest of rota sees it: the client's type, the two error families, the
retry a pool's connections use, and the slot of a key. Only :mod:`rota.wire` and
:mod:`rota.redis` import redis-py (a test holds this): what rota depends on of it reads
in one screen. rota's own errors for redis-py's (:func:`rota.redis.outage.rota_error`)
are no redis-py errors: :data:`rota.redis.outage.REDIS_ERRORS` catches both.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import (
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    RedisError,
    ResponseError,
)

__all__ = [
    "REDIS_ERRORS",
    "NoPermissionError",
    "NoScriptError",
    "OutOfMemoryError",
    "Pipeline",
    "Redis",
    "RedisError",
    "ReplyError",
    "key_slot",
    "one_quick_retry",
    "wrong_type",
]

#: An error reply of Redis (``ERR ...``, ``WRONGTYPE ...``, ``NOSCRIPT ...``), raised or
#: standing in a pipeline's replies in its place.
ReplyError = ResponseError

#: What a Redis command raises: a reply redis-py turned into an error, or the socket's.
REDIS_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError)


def wrong_type(value: Any) -> bool:
    """Whether ``value`` (an exception raised, or a pipeline's reply in its place) is
    Redis saying that a key holds another type than the command reads: for rota's reads,
    not the record that was asked for."""
    return isinstance(value, ResponseError) and str(value).startswith("WRONGTYPE")


def one_quick_retry() -> Retry:
    """One immediate retry on a fresh connection (a pooled one that a Redis restart left
    stale) and no more: redis-py's own retries would wait seconds inside one command,
    where a pool's tasks wait outages out themselves."""
    return Retry(NoBackoff(), 1)
