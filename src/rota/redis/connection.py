"""Redis connections from a URL.

rota talks bytes to Redis (``decode_responses=False``): args and results are JSON text
handed through untouched. ``redis://``, ``rediss://`` (TLS) and ``unix://`` URLs are
understood by redis-py, including ``user:password@`` for ACL users;
``redis+sentinel://`` and ``redis+cluster://`` name a topology (:mod:`rota.redis.topology`).
:func:`rota.urls.check_url` refuses any other before a connection is tried.
"""

from __future__ import annotations

import ssl
from typing import Any

from redis.asyncio import Redis

from rota.errors import ConfigError
from rota.redis import topology
from rota.urls import CLUSTER, SENTINEL, check_url, redacted

__all__ = ["connect", "tls_refused"]


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def tls_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS handshake that failed for good (a certificate refused,
    no common protocol): waiting does not mend it, unlike a connection that dropped."""
    for e in _chain(exc):
        if isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLWantReadError):
            continue
        if isinstance(e, ssl.SSLError):
            return True
    text = str(exc)
    return "[SSL:" in text and "EOF" not in text


def connect(url: str, *, namespace: str | None = None, **options: Any) -> Redis:
    """A client with its own connection pool for ``url`` (a
    :class:`~rota.errors.ConfigError` when it is not a URL rota can use). Under Sentinel
    it serves the current primary; in a cluster the owner of ``namespace``'s slot.

    Blocking reads (the fetcher's and scheduler's BLPOP) hold a connection each, so the
    pool is not capped; health checks keep idle connections honest after a Redis restart.
    Blocking reads wait at most a few seconds, well inside the socket timeout.
    """
    check_url(url)
    # redis-py 8 caps a pool at 100 connections and fails the next checkout ("Too many
    # connections"): a pool of 100 workers whose handlers use the client would hit it.
    options.setdefault("max_connections", 2**31)
    options.setdefault("health_check_interval", 30)
    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("socket_timeout", 15)
    if not url.startswith("unix:"):
        options.setdefault("socket_keepalive", True)
    if url.startswith((SENTINEL, CLUSTER)):
        return topology.connect_topology(url, namespace, **options)
    try:
        return Redis.from_url(url, decode_responses=False, **options)
    except ValueError as exc:  # a query parameter only redis-py reads (ssl_*_verify_flags)
        raise ConfigError(f"redis_url: {redacted(url)}: {exc}") from None
