"""Reaching Redis: a client for a URL (:func:`connect`: bytes in and out, a topology for
``redis+sentinel://`` and ``redis+cluster://``), and one for the settings
(:func:`connect_to`), through which every part of rota connects, so the same settings
work everywhere: ``redis_url`` with, for ``rediss://``, the CA and client certificate
files (``redis_tls_*``, or redis-py's own ``ssl_*`` query parameters), and an ACL user
whose password comes from the URL, ``redis_password`` or ``redis_password_file``.

A wrong password, a command the ACL user may not run, a certificate the other side
refuses or a server that does not answer are told by :func:`explain` in one line that
names the setting to look at and what to do, never with the password.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import redis.exceptions as errors
from redis.asyncio import Redis

from rota.config import Settings
from rota.errors import ConfigError, RedisRefused, RedisUnavailable, redis_cause
from rota.redis import topology
from rota.redis.outage import REPLY_ERRORS, UNREACHABLE_ERRORS, tls_refused
from rota.urls import CLUSTER, SENTINEL, check_url, redacted

__all__ = ["acl_refused", "connect", "connect_to", "explain", "redis_options"]


def connect(url: str, *, namespace: str | None = None, **options: Any) -> Redis:
    """A client with its own connection pool for ``url`` (a
    :class:`~rota.errors.ConfigError` when it is not a URL rota can use). Under Sentinel
    it serves the current primary; in a cluster the owner of ``namespace``'s slot.

    Blocking reads (the fetcher's and scheduler's BLPOP) hold a connection each, so the
    pool is not capped; health checks keep idle connections honest after a Redis restart.
    A blocking read waits a second less than the socket timeout at most
    (:func:`rota.wire.conn.block_within`), so that it never reads as a Redis away.
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


_ROLES = (
    'the rules of its role, which `rota acl ROLE` prints (docs/operations.md, "Least privilege")'
)


def redis_options(settings: Settings) -> dict[str, Any]:
    """redis-py's connection options for the TLS and ACL settings (the URL's own
    ``user:password@`` and query parameters win over them)."""
    options: dict[str, Any] = {}
    if settings.redis_username:
        options["username"] = settings.redis_username
    password = settings.secret("redis_password")
    if password:
        options["password"] = password
    if settings.redis_tls_ca:
        options["ssl_ca_certs"] = settings.redis_tls_ca
    if settings.redis_tls_cert:
        options["ssl_certfile"] = settings.redis_tls_cert
        options["ssl_keyfile"] = settings.redis_tls_key
    return options


def connect_to(settings: Settings, **options: Any) -> Redis:
    """A redis-py client of its own for ``settings`` (see :func:`connect`)."""
    return connect(settings.redis_url, **{**redis_options(settings), **options})


def acl_refused(exc: BaseException) -> bool:
    """Whether Redis refused a command to this ACL user: ``NOPERM``, or (Redis 7.0) the
    same refusal of a command run inside a function or script."""
    exc = redis_cause(exc)
    if isinstance(exc, errors.NoPermissionError):
        return True
    return isinstance(exc, REPLY_ERRORS) and "can't run this command" in str(exc)


def explain(exc: BaseException, settings: Settings) -> str | None:
    """One line for a connection that failed for want of the right settings (a wrong
    password, a refused command, TLS, no server there), naming the setting and what to
    do; None for any other error."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return explain(exc.exceptions[0], settings)
    if not isinstance(exc, RedisRefused | RedisUnavailable | errors.RedisError):
        return None  # not Redis's answer: an OSError of the program's own setup, say
    exc = redis_cause(exc)
    url = redacted(settings.redis_url)
    user = _user(settings)
    if isinstance(exc, errors.AuthenticationError) or str(exc).startswith("NOAUTH"):
        if _password_in_url(settings.redis_url):  # it wins over redis_password: blame it
            return (
                f"redis_url: Redis at {url} refused the credentials of user {user} that the"
                f" URL gives ({exc}): correct user:password in redis_url (ROTA_REDIS_URL,"
                " --redis-url), or leave them out of it and set redis_username and"
                " redis_password"
            )
        return (
            f"redis_password: Redis at {url} refused the credentials of user {user} ({exc}):"
            " set redis_username and redis_password (or redis_password_file,"
            " ROTA_REDIS_PASSWORD), or user:password in redis_url"
        )
    if acl_refused(exc):
        return (
            f"redis_username: Redis at {url} refused a command to user {user} ({exc}):"
            f" give the user {_ROLES}"
        )
    if not isinstance(exc, UNREACHABLE_ERRORS):
        return None
    if tls_refused(exc):
        return (
            f"redis_tls_ca: the TLS handshake with {url} failed ({exc}): check redis_tls_ca"
            " (the CA that signed the server's certificate) and, when the server asks for"
            " a client certificate, redis_tls_cert and redis_tls_key"
        )
    hint = "check that Redis runs there and listens on that host and port"
    if settings.redis_url.startswith("rediss:"):
        hint += "; a server that asks for client certificates needs redis_tls_cert/_key"
    elif not settings.redis_url.startswith("unix:"):
        hint += ", and use rediss:// if it speaks TLS"
    return f"redis_url: cannot connect to {url} ({exc}): {hint}"


def _password_in_url(url: str) -> bool:
    """Whether ``url`` carries a password (``user:password@``, or redis-py's
    ``password=`` query parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    query = (p.partition("=")[0] for p in parts.query.split("&"))
    return parts.password is not None or "password" in query


def _user(settings: Settings) -> str:
    try:
        name = urlsplit(settings.redis_url).username
    except ValueError:
        name = None
    return repr(unquote(name) if name else settings.redis_username or "default")
