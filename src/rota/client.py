"""The client: enqueue jobs, read them back, and operate queues and job sets.

Everything the CLI and the web UI show or change goes through here, so they never need
the worker package.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar

from rota.config import Settings, from_environment
from rota.operations import Bucket, History, Page, QueueInfo, RunningJob
from rota.protocol.calls import Scope
from rota.protocol.job import JobSet, now_ms, validate_name
from rota.protocol.keys import Keys
from rota.protocol.scripts import ScriptMode
from rota.protocol.shards import shard_tag
from rota.redis.access import connect, connect_to
from rota.redis.outage import guarded
from rota.redis.sentinel import follow_primary
from rota.sharding import Sharded
from rota.spec import Enqueued, JobSpec
from rota.urls import CLUSTER
from rota.wire.conn import Conn, RedisPyConn, hot_path
from rota.wire.redispy import Redis

T = TypeVar("T")

__all__ = [
    "Bucket",
    "Client",
    "Enqueued",
    "History",
    "JobSet",
    "JobSpec",
    "Page",
    "QueueInfo",
    "RunningJob",
    "now_ms",
    "validate_name",
]

_DEFAULT_MAX_ARGS = 512 * 1024
#: What Client.from_url uses for a setting neither given nor set by a ROTA_* variable.
_DEFAULTS = Settings()


class Client(Sharded):
    """Enqueue and inspect jobs of one namespace.

    >>> client = Client.from_url("redis://localhost:6379/0")
    >>> job = await client.enqueue("send_email", to="a@b.c")
    """

    def __init__(
        self,
        redis: Redis,
        namespace: str = "rota",
        *,
        max_args_bytes: int = _DEFAULT_MAX_ARGS,
        unique_ttl: float = 86400.0,
        owns_redis: bool = False,
        durable: int = 0,
        durable_timeout: float = 2.0,
        ride_through: float = 10.0,
        shards: int = 1,
        shard_redis: Sequence[Redis] = (),
        shard: int = 0,
    ) -> None:
        self.redis = redis
        self.ride_through = ride_through  # see enqueue_many
        self._reached = False  # whether an enqueue ever got through (see _riding)
        self.keys = Keys(namespace, shard, shards)
        self.max_args_bytes = max_args_bytes
        self.unique_ttl = unique_ttl
        self._owns_redis = owns_redis
        self.durable, self.durable_timeout = durable, durable_timeout  # see enqueue_many
        #: What the hot path sends through: a Link to the server of ``redis`` (the same
        #: credentials, TLS and timeouts), else the redis-py client itself.
        self.conn: Conn = hot_path(redis)
        #: How scripts are called on this server, by FCALL until it refuses functions:
        #: per client, as one process may talk to servers that differ (Redis 6.2 and 7,
        #: users with other rights); the pool's fetcher connection shares it.
        self.script_mode = ScriptMode()
        #: Script calls on the redis-py client, and on the hot path's connection.
        self.scope = Scope(RedisPyConn(redis), self.keys.prefix, self.script_mode)
        self.hot = self.scope.on(self.conn)
        #: The namespace's shards (see rota.sharding): this client is part ``shard`` of
        #: the ``root`` client, which holds every part.
        self.shard_count = shards
        self.root: Client = self
        self.parts: tuple[Client, ...] = (self,)
        if shard == 0 and shards > 1:
            links = list(shard_redis) or [redis] * (shards - 1)
            parts = [
                Client(
                    links[i - 1],
                    namespace,
                    max_args_bytes=max_args_bytes,
                    unique_ttl=unique_ttl,
                    owns_redis=owns_redis and bool(shard_redis),
                    durable=durable,
                    durable_timeout=durable_timeout,
                    ride_through=ride_through,
                    shards=shards,
                    shard=i,
                )
                for i in range(1, shards)
            ]
            for part in parts:
                part.root = self
            self.parts = (self, *parts)

    @classmethod
    def from_url(
        cls,
        url: str,
        namespace: str | None = None,
        *,
        max_args_bytes: int | None = None,
        unique_ttl: float | None = None,
        durable: int | None = None,
        durable_timeout: float | None = None,
        ride_through: float | None = None,
        shards: int | None = None,
        **options: Any,
    ) -> Client:
        """A client for ``url``; other keyword arguments go to the connection, as
        redis-py's ``Redis.from_url`` takes them (``ssl_ca_certs``, ``socket_timeout``,
        ``username``, ``password``...). A setting not given here is read from its
        ``ROTA_*`` variable (``ROTA_NAMESPACE``, ``ROTA_MAX_ARGS_BYTES``,
        ``ROTA_UNIQUE_TTL``, ``ROTA_DURABLE_ENQUEUE``, ``ROTA_DURABLE_TIMEOUT``,
        ``ROTA_RIDE_THROUGH``, ``ROTA_SHARDS``) when it is set, else its default, as the
        pools read them (a bad value raises a ConfigError naming the variable)."""
        given = {
            "namespace": namespace,
            "max_args_bytes": max_args_bytes,
            "unique_ttl": unique_ttl,
            "durable_enqueue": durable,
            "durable_timeout": durable_timeout,
            "ride_through": ride_through,
            "shards": shards,
        }
        unset = [name for name, value in given.items() if value is None]
        s = {
            **{name: getattr(_DEFAULTS, name) for name in unset},
            **from_environment(unset),
            **{name: value for name, value in given.items() if value is not None},
        }
        ns = s["namespace"]
        return cls(
            connect(url, namespace=ns, **options),
            ns,
            owns_redis=True,
            max_args_bytes=s["max_args_bytes"],
            unique_ttl=s["unique_ttl"],
            durable=s["durable_enqueue"],
            durable_timeout=s["durable_timeout"],
            ride_through=s["ride_through"],
            shards=s["shards"],
            shard_redis=_shard_connections(
                url, ns, s["shards"], lambda tag: connect(url, **{**options, "namespace": tag})
            ),
        )

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> Client:
        """A client for the namespace of ``settings``, connected as they say (URL, TLS
        files, ACL user and password: see :mod:`rota.redis.access`); ``options`` as in
        :meth:`from_url`."""
        options.setdefault("namespace", settings.namespace)  # a cluster serves its slot
        return cls(
            connect_to(settings, **options),
            settings.namespace,
            owns_redis=True,
            max_args_bytes=settings.max_args_bytes,
            unique_ttl=settings.unique_ttl,
            durable=settings.durable_enqueue,
            durable_timeout=settings.durable_timeout,
            ride_through=settings.ride_through,
            shards=settings.shards,
            shard_redis=_shard_connections(
                settings.redis_url,
                settings.namespace,
                settings.shards,
                lambda tag: connect_to(settings, **{**options, "namespace": tag}),
            ),
        )

    async def follow_primary(self) -> None:
        """Under Sentinel, until cancelled: leave the old primary the moment the sentinels
        announce a new one, so that no enqueue goes to a server about to be demoted (see
        :mod:`rota.redis.sentinel`). Returns at once for any other Redis. A long-lived producer
        runs it beside its work: ``tg.start_soon(client.follow_primary)``."""
        await follow_primary(self.redis)

    async def close(self) -> None:
        """Close the link; and the redis-py client too when this client made it."""
        for part in self.parts[1:]:
            await part.close()
        await self.conn.aclose()
        if self._owns_redis:
            await self.redis.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def namespace(self) -> str:
        return self.keys.namespace


def _guard_methods(cls: type[Client]) -> None:
    """Every public coroutine method of the client (its bases' too) raises rota's errors,
    not redis-py's (see :func:`rota.redis.outage.guarded`): the one place they change."""
    for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if not name.startswith("_") and name != "run_script":  # the enqueue's own step
            setattr(cls, name, guarded(method))


_guard_methods(Client)


def _shard_connections(
    url: str, namespace: str, shards: int, connect_tag: Callable[[str], Redis]
) -> list[Redis]:
    """Connections for shards 1..K-1 in a cluster, each to the owner of its shard's slot
    (``connect_tag`` of the shard's tag); none elsewhere: every shard is on the one
    server, reached through the first connection."""
    if shards <= 1 or not url.startswith(CLUSTER):
        return []
    return [connect_tag(shard_tag(namespace, i, shards)) for i in range(1, shards)]
