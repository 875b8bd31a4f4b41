"""Redis URLs as data, checked before anything connects and shown without their
passwords; no redis-py here, so the settings (:mod:`rota.config`) check a URL without a
Redis module. ``redis://``, ``rediss://`` (TLS) and ``unix://`` name one server;
``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]`` the sentinels that
watch the primary ``service`` (the user and password are the data servers'; the
sentinels' own is ``sentinel_password``, a setting or a query parameter), and
``redis+cluster://[user:pass@]host:port[,host:port...]`` the seed nodes of a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

from rota.errors import ConfigError

__all__ = ["CLUSTER", "SENTINEL", "Topology", "check_url", "parse", "redacted", "sentinel_url"]

SENTINEL: Final = "redis+sentinel"
CLUSTER: Final = "redis+cluster"
_UNDERSTOOD: Final = (
    "rota understands redis://, rediss:// and unix:// URLs,"
    " and redis+sentinel:// and redis+cluster:// ones for a topology"
)
#: The query parameters redis-py reads as numbers: a value that is none is refused here,
#: in redis-py's words, as it would refuse it when connecting.
_NUMBERS: Final[dict[str, Callable[[str], object]]] = {
    **dict.fromkeys(("db", "socket_read_size", "max_connections", "protocol"), int),
    **dict.fromkeys(("health_check_interval", "ssl_min_version"), int),
    **dict.fromkeys(("socket_timeout", "socket_connect_timeout", "timeout"), float),
}


@dataclass(frozen=True, slots=True)
class Topology:
    """What a ``redis+sentinel://`` or ``redis+cluster://`` URL says."""

    kind: str  # SENTINEL or CLUSTER
    nodes: tuple[tuple[str, int], ...]  # sentinels, or seed nodes
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def parse(url: str) -> Topology:
    """The topology of ``url``; a :class:`~rota.errors.ConfigError` naming ``redis_url``
    and what is wrong."""
    scheme, sep, rest = url.partition("://")
    if scheme not in (SENTINEL, CLUSTER) or not sep:
        raise ConfigError(f"redis_url: not a {SENTINEL}:// or {CLUSTER}:// URL")
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ConfigError(
                f"redis_url: {scheme}:// needs host:port pairs separated by commas, got {item!r}"
            )
        nodes.append((host.strip("[]"), int(port)))
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    parts = [unquote(p) for p in path.split("/") if p]
    if scheme == CLUSTER:
        if parts:
            raise ConfigError(
                "redis_url: a cluster has one database only: give no service or database"
                " after the hosts of redis+cluster://"
            )
        return Topology(CLUSTER, tuple(nodes), username=username, password=password)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ConfigError(
            "redis_url: redis+sentinel:// needs the service name after the sentinels,"
            " then optionally the database: redis+sentinel://host:26379/mymaster/0"
        )
    return Topology(
        SENTINEL,
        tuple(nodes),
        service=parts[0],
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=username,
        password=password,
        sentinel_password=params.get("sentinel_password"),
    )


def sentinel_url(base: str, sentinels: str, service: str, sentinel_password: str = "") -> str:
    """The ``redis+sentinel://`` URL of the settings ``sentinels`` (``host:port,...``),
    ``sentinel_service`` and ``sentinel_password``; what they leave out comes from
    ``base`` (the ``redis_url`` setting): the user, password and database, and the
    sentinels and service when ``base`` is a ``redis+sentinel://`` URL already."""
    parts = urlsplit(base)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    db = ""
    if base.startswith(SENTINEL):
        old = parse(base)
        db = str(old.db)
        sentinels = sentinels or ",".join(f"{h}:{p}" for h, p in old.nodes)
        service = service or old.service
        sentinel_password = sentinel_password or old.sentinel_password or ""
    elif parts.scheme in ("redis", "rediss"):
        db = unquote(parts.path).strip("/")
    if not sentinels:
        raise ConfigError("sentinels: give the sentinels as host:port,host:port")
    if not service:
        raise ConfigError("sentinel_service: give the name the sentinels monitor, e.g. mymaster")
    url = f"{SENTINEL}://{userinfo + '@' if userinfo else ''}{sentinels.replace(' ', '')}/{service}"
    url += f"/{db}" if db and db != "0" else ""
    if sentinel_password:
        url += "?sentinel_password=" + quote(sentinel_password, safe="")
    try:
        parse(url)
    except ConfigError as exc:
        raise ConfigError(f"sentinels: {exc}") from None
    return url


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
    if parts.scheme not in ("redis", "rediss", "unix", SENTINEL, CLUSTER):
        if "://" in url:
            what = f"unknown scheme {parts.scheme}:// in {redacted(url)!r}"
        else:
            what = "not a URL"
        raise ConfigError(f"redis_url: {what}: {_UNDERSTOOD}")
    if parts.scheme in (SENTINEL, CLUSTER):
        parse(url)
        return url
    try:
        _read_as_redis_py_does(parts)
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


def _read_as_redis_py_does(parts: SplitResult) -> None:
    """redis-py's ValueError for what it cannot read in the URL of one server: a number
    parameter that is none, then a port that is none (``redis://``, ``rediss://``)."""
    for name, values in parse_qs(parts.query).items():
        try:
            _NUMBERS.get(name, str)(values[0])
        except ValueError:
            raise ValueError(f"Invalid value for '{name}' in connection URL.") from None
    _ = parts.port if parts.scheme != "unix" else 0  # "Port could not be cast to integer..."


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
