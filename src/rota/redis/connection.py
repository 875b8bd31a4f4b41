"""Redis connections from a URL.

rota talks bytes to Redis (``decode_responses=False``): args and results are JSON text
handed through untouched. ``redis://``, ``rediss://`` (TLS) and ``unix://`` URLs are
understood by redis-py, including ``user:password@`` for ACL users;
``redis+sentinel://`` and ``redis+cluster://`` name a topology (:mod:`rota.redis.topology`).
:func:`check_url` refuses any other before a connection is tried.
"""

from __future__ import annotations

import ssl
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.connection import parse_url

from rota.errors import ConfigError
from rota.redis import topology

__all__ = ["SCHEMES", "check_url", "connect", "redacted", "tls_refused"]

#: The URL schemes rota connects with.
SCHEMES: Final = ("redis", "rediss", "unix", topology.SENTINEL, topology.CLUSTER)
_UNDERSTOOD: Final = (
    "rota understands redis://, rediss:// and unix:// URLs,"
    " and redis+sentinel:// and redis+cluster:// ones for a topology"
)


def check_url(url: str) -> str:
    """``url`` when it is a Redis URL rota can use, else a
    :class:`~rota.errors.ConfigError` naming ``redis_url`` and the schemes understood.

    The message shows the URL without its password.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"redis_url: empty: {_UNDERSTOOD}, e.g. redis://localhost:6379/0")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unbalanced [ in the host
        raise ConfigError(f"redis_url: not a URL ({exc}): {_UNDERSTOOD}") from None
    if parts.scheme not in SCHEMES:
        if "://" in url:
            what = f"unknown scheme {parts.scheme}:// in {redacted(url)!r}"
        else:
            what = "not a URL"
        raise ConfigError(f"redis_url: {what}: {_UNDERSTOOD}")
    if parts.scheme in (topology.SENTINEL, topology.CLUSTER):
        topology.parse(url)
        return url
    try:
        parse_url(url)
    except ValueError as exc:  # a port that is not a number, a bad query parameter...
        raise ConfigError(f"redis_url: {redacted(url)}: {exc}") from None
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError(f"redis_url: {redacted(url)}: give the socket's path, unix:///path")
    else:
        db = unquote(parts.path).strip("/")
        if db and not db.isdigit():
            raise ConfigError(
                f"redis_url: {redacted(url)}: the database after the host must be a number"
            )
    return url


def redacted(url: str) -> str:
    """``url`` with its password, if any, shown as ``***`` (also a ``password=`` query
    parameter, which redis-py reads too)."""
    try:
        parts = original = urlsplit(url)
        if parts.query and "password=" in parts.query:
            query = "&".join(_masked(p) for p in parts.query.split("&"))
            parts = parts._replace(query=query)
        if parts.password is not None:
            user = parts.username or ""
            host = parts.netloc.rpartition("@")[2]
            parts = parts._replace(netloc=f"{user}:***@{host}")
        if parts == original:
            return url
        return f"{parts.scheme}://{parts.netloc}{parts.path}?{parts.query}".removesuffix("?")
    except ValueError:
        return "(a URL that cannot be read)"


def _masked(param: str) -> str:
    """A query parameter with its value masked when it is a password (``password``, and
    ``sentinel_password`` of a ``redis+sentinel://`` URL)."""
    name = param.partition("=")[0]
    return f"{name}=***" if name in ("password", "sentinel_password") else param


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
    if url.startswith((topology.SENTINEL, topology.CLUSTER)):
        return topology.connect_topology(url, namespace, **options)
    return Redis.from_url(url, decode_responses=False, **options)
