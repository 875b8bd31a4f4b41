"""Redis connections from a URL.

rota talks bytes to Redis (``decode_responses=False``): args and results are JSON text
handed through untouched. ``redis://``, ``rediss://`` (TLS) and ``unix://`` URLs are
understood by redis-py, including ``user:password@`` for ACL users.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

__all__ = ["connect"]


def connect(url: str, **options: Any) -> Redis:
    """A client with its own connection pool for ``url``.

    Blocking reads (the fetcher's and scheduler's BLPOP) hold a connection each, so the
    pool is not capped; health checks keep idle connections honest after a Redis restart.
    Blocking reads wait at most a few seconds, well inside the socket timeout.
    """
    options.setdefault("health_check_interval", 30)
    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("socket_timeout", 15)
    if not url.startswith("unix:"):
        options.setdefault("socket_keepalive", True)
    return Redis.from_url(url, decode_responses=False, **options)
