"""Sentinel and Cluster: which server serves a namespace, found again when it changes.

Two URL forms name a topology instead of one server (:mod:`rota.urls` reads them).

Under Sentinel, redis-py's ``SentinelConnectionPool`` asks the sentinels for the primary
whenever a connection is opened, and drops a connection that answers ``READONLY`` (its
server was demoted). rota uses it as it is.

A Cluster is served the same way, on purpose without redis-py's cluster client: a
namespace lives in one hash slot (every key starts with ``{ns}:``), so everything rota
sends for it goes to one node, the owner of that slot. :class:`SlotOwnerPool` is an
ordinary connection pool whose connections ask the cluster (``CLUSTER SLOTS``, which
6.2 to 8 answer) for that owner when they connect, and drop themselves when a reply says
the slot is elsewhere (``MOVED``) or the connection is lost; the next command connects to
the new owner. The answers are kept in one map of the cluster's slots that every pool of
the process over that cluster shares (:mod:`rota.redis.slotmap`): one ``CLUSTER SLOTS``
answer serves every shard, a second at a time. Pipelines, ``MULTI``, ``FCALL``, blocking
reads and the hot-path :class:`~rota.wire.link.Link` (which connects through
:meth:`SlotOwnerPool.locate` too) stay single-node code: no per-command slot routing, no
cluster client in the hot path.

``ASK`` is deliberately not followed. While a namespace's slot migrates, its keys are
split between two nodes, and a script sent to either would find some of its keys
missing halfway through (Redis aborts it there, after the writes it made: a job popped
from its queue but never leased). The source node answers ``ASK`` to every rota script
in that window (a script's only declared key, the prefix, never exists), so the scripts
simply do not run: :mod:`rota.redis.outage` counts ``ASK`` as "the cluster is changing, wait
and retry", and once ``CLUSTER SETSLOT ... NODE`` ends the migration the old node says
``MOVED`` and connections follow.
"""

from __future__ import annotations

import weakref
from typing import Any

import redis.exceptions as errors
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.crc import key_slot

from rota.errors import ConfigError
from rota.protocol.keys import prefix_of
from rota.redis.outage import condition
from rota.redis.sentinel import SentinelPool
from rota.redis.slotmap import slot_map
from rota.urls import CLUSTER, SENTINEL, parse

__all__ = [
    "SlotOwnerPool",
    "connect_topology",
    "located",
    "moved",
    "node_client",
    "owner_lost",
    "server_of",
    "slot_owner",
    "wait_replicas",
]


class SlotOwnerConnection(Connection):
    """A connection to the node that owns its pool's slot; see the module's docstring."""

    def __init__(self, **kwargs: Any) -> None:
        self.owner_pool: SlotOwnerPool = kwargs.pop("connection_pool")
        super().__init__(**kwargs)

    async def _connect(self) -> None:
        self.host, self.port = await self.owner_pool.locate()
        try:
            await super()._connect()  # type: ignore[no-untyped-call]
        except (OSError, errors.ConnectionError, errors.TimeoutError):
            self.owner_pool.lost((self.host, self.port))
            raise

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except (OSError, errors.ConnectionError):
            self.owner_pool.lost((str(self.host), int(self.port)))
            raise
        except errors.MovedError as exc:  # not ASK: see the module's docstring
            self.owner_pool.forget((exc.host, int(exc.port)))
            await self.disconnect()
            # A ConnectionError: redis-py's retry connects again, to the new owner.
            raise errors.ConnectionError(f"the namespace's slot moved: MOVED {exc}") from None


class SlotOwnerPool(ConnectionPool):
    """A pool of connections to the owner of one hash slot of a cluster, located through
    the cluster's :class:`~rota.redis.slotmap.SlotMap`, which every pool of this process
    over the same cluster shares (one ``CLUSTER SLOTS`` answer covers every slot)."""

    def __init__(self, seeds: tuple[tuple[str, int], ...], slot: int, **kwargs: Any) -> None:
        kwargs["connection_class"] = SlotOwnerConnection
        super().__init__(**kwargs)
        self.connection_kwargs["connection_pool"] = weakref.proxy(self)
        self.seeds = list(seeds)
        self.slot = slot
        self.map = slot_map(seeds, kwargs)
        self._owner: tuple[str, int] | None = None
        self._lost: tuple[str, int] | None = None  # the owner last found unreachable

    def __repr__(self) -> str:
        """The cluster's URL (password masked), the slot and its owner as last located.
        Not redis-py's list of the connection options: one of them is this pool (each
        connection finds it there), and printing it printed this again, without end."""
        kw = self.connection_kwargs
        user = kw.get("username") or ""
        auth = f"{user}:***@" if kw.get("password") else f"{user}@" if user else ""
        seeds = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.seeds)
        owner = "?" if self._owner is None else "{}:{}".format(*self._owner)
        return f"<SlotOwnerPool {CLUSTER}://{auth}{seeds} slot={self.slot} owner={owner}>"

    @property
    def nodes(self) -> list[tuple[str, int]]:
        """The seeds and every node a reply named since."""
        return self.map.nodes

    @property
    def owner(self) -> tuple[str, int] | None:
        """The primary that serves the slot as last located, without asking (None: not
        located, or since found moved or lost)."""
        return self._owner

    def forget(self, where: tuple[str, int]) -> None:
        """The owner moved to ``where``, as a ``MOVED`` reply says: the cluster's map
        places the slot there, and the next connection goes there without asking."""
        self._owner = None
        self.map.moved(self.slot, where)

    def lost(self, where: tuple[str, int]) -> None:
        """A connection to ``where`` failed: if it is the owner, the next connection asks
        the cluster again instead of trusting it for the rest of its time, and prefers a
        node's answer that names another owner (a replica that took over says so before
        gossip has told every node): a pool is back within a probe of the promotion."""
        self._lost = where
        if self._owner == where:
            self._owner = None
        self.map.lost(where)

    async def locate(self) -> tuple[str, int]:
        """The primary that owns the slot, as the cluster's map says (asked again when
        older than a second, once for every pool locating at the same time)."""
        self._owner = await self.map.locate(self.slot)
        return self._owner


def server_of(redis: Redis) -> str:
    """The server ``redis`` talks to, as ``host:port`` (or a socket's path): in a
    cluster, the owner of its slot as last located ("?" before the first command)."""
    pool = redis.connection_pool
    if isinstance(pool, SlotOwnerPool):
        owner = pool._owner
        return "?" if owner is None else f"{owner[0]}:{owner[1]}"
    kw = pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host', '?')}:{kw.get('port', '?')}")


def located(redis: Redis) -> tuple[str, int] | None:
    """In a cluster, the primary of ``redis``'s slot as last located, without asking
    (see :attr:`SlotOwnerPool.owner`): what groups a pool's shards by node for one call
    a node. None elsewhere, and while it is not located."""
    pool = redis.connection_pool
    return pool.owner if isinstance(pool, SlotOwnerPool) else None


def owner_lost(redis: Redis) -> str | None:
    """In a cluster, the primary of ``redis``'s slot as the cluster named it, since
    found unreachable (``host:port``): the cluster answers, that node does not. None
    elsewhere, and while it was not lost."""
    pool = redis.connection_pool
    if isinstance(pool, SlotOwnerPool) and pool._lost is not None:
        return "{}:{}".format(*pool._lost)
    return None


async def slot_owner(redis: Redis) -> tuple[str, int] | None:
    """The primary that serves ``redis``'s slot of a cluster, as last located (asked
    again after a second); None when no node names it now."""
    pool = redis.connection_pool
    assert isinstance(pool, SlotOwnerPool)
    try:
        return await pool.locate()
    except Exception as exc:
        if isinstance(exc, OSError | errors.RedisError) or condition(exc) is not None:
            return None
        raise


def node_client(redis: Redis, node: tuple[str, int]) -> Redis:
    """A client of the node ``node`` of ``redis``'s cluster, with its credentials, that
    tries each command once: a pub/sub connection that must end, not reconnect, when
    the node is lost (:mod:`rota.worker.nodewaits`)."""
    kw = redis.connection_pool.connection_kwargs
    return Redis(
        host=node[0],
        port=node[1],
        username=kw.get("username"),
        password=kw.get("password"),
        socket_connect_timeout=kw.get("socket_connect_timeout"),
        socket_keepalive=True,
        retry=Retry(NoBackoff(), 0),
    )


def moved(exc: BaseException) -> bool:
    """Whether ``exc`` is a node's ``MOVED``: the slot is served elsewhere now."""
    return isinstance(exc, errors.MovedError)


def connect_topology(url: str, namespace: str | None, **options: Any) -> Redis:
    """A redis-py client of the primary that serves ``namespace`` under ``url``."""
    topo = parse(url)
    options.pop("db", None)
    if topo.username is not None:  # the URL's user and password win, as for redis://
        options["username"] = topo.username
    if topo.password is not None:
        options["password"] = topo.password
    sentinel_password = options.pop("sentinel_password", None) or topo.sentinel_password
    if topo.kind == SENTINEL:
        sentinel_options: dict[str, Any] = {
            k: options[k]
            for k in ("socket_connect_timeout", "socket_timeout", "socket_keepalive")
            if k in options
        }
        if sentinel_password:
            sentinel_options["password"] = sentinel_password
        manager = Sentinel(list(topo.nodes), sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
        client: Redis = manager.master_for(
            topo.service,
            redis_class=Redis,
            connection_pool_class=SentinelPool,
            db=topo.db,
            **options,
        )
        return client
    if not namespace:
        raise ConfigError(
            "redis_url: a redis+cluster:// connection serves one namespace: give the namespace"
        )
    slot = key_slot(prefix_of(namespace).encode())
    return Redis.from_pool(SlotOwnerPool(topo.nodes, slot, **options))  # closes with it


async def wait_replicas(conn: Any, replicas: int, timeout: float) -> int:  # noqa: ASYNC109
    """``WAIT replicas timeout`` on ``conn`` (the connection that made the writes): how
    many replicas acknowledged every write of that connection so far."""
    return int(await conn.execute_command("WAIT", replicas, max(1, int(timeout * 1000))))
