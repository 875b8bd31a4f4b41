"""The producer's client: enqueue jobs, chains and groups; read, wait for and abort a
job. The operator's reads and writes are one attribute away, :attr:`Client.admin`.

A client holds one :class:`~rota.client.shard.Shard` per shard of its namespace and
routes over them by the rules of :mod:`rota.client.routing`: a job to the shard of its
key, a read of a job to the shard its id names. One shard goes through the same rules.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self

from rota.client.admin import Admin
from rota.client.debounce import Debounce
from rota.client.enqueue import durable_send, riding, traced
from rota.client.follow import Follower
from rota.client.methods import MOVED, guard_methods, moved
from rota.client.options import DEFAULTS, Options
from rota.client.routing import Shards
from rota.client.shard import Shard
from rota.client.spec import Enqueued, JobSpec, delay_seconds, moment_seconds, to_row
from rota.client.workflow import Group, GroupProgress, chained, group_rows
from rota.config import Settings
from rota.protocol.job import JobRecord
from rota.protocol.keys import Keys
from rota.protocol.rows import EnqueueRow
from rota.protocol.shards import place, shard_tag
from rota.redis.access import connect, connect_to
from rota.redis.sentinel import follow_primary
from rota.urls import CLUSTER
from rota.wire.redispy import Redis

__all__ = ["Client"]

_OPTIONS = frozenset(
    {"unique", "unique_ttl", "job_id", "max_fails", "timeout", "after", "expires_in", "expires_at"}
    | {"debounce"}
    | {"fair_key", "ordered"}
)
_FIELDS = frozenset(f.name for f in dataclasses.fields(Options))
#: The shards of jobs enqueued before, by id (see :meth:`Client._enqueue`).
_Placed = Mapping[str, int] | None


class Client:
    """Enqueue and read jobs of one namespace; operate it through :attr:`admin`.

    >>> client = Client.from_url("redis://localhost:6379/0")
    >>> job = await client.enqueue("send_email", to="a@b.c")

    ``options``: those of :class:`~rota.client.options.Options` (``max_args_bytes``,
    ``unique_ttl``, ``durable``, ``durable_timeout``, ``ride_through``, ``shards``,
    ``ordered``: the setting ``ordered`` of :class:`~rota.config.Settings`, see
    "Ordered names" in docs/operations.md).
    ``shard_redis``: the connections of shards 1..K-1 (in a cluster, each to the node
    of its shard's slot); without them every shard is reached through ``redis``.
    """

    def __init__(
        self,
        redis: Redis,
        namespace: str = "rota",
        *,
        owns_redis: bool = False,
        shard_redis: Sequence[Redis] = (),
        **options: Any,
    ) -> None:
        self.options = DEFAULTS.replace(namespace=namespace, **options)
        k = self.options.shards
        links = [redis, *(shard_redis or [redis] * (k - 1))]
        self._route = Shards(
            [
                Shard(
                    links[i],
                    Keys(namespace, i, k),
                    k,
                    owns_redis=owns_redis and (i == 0 or bool(shard_redis)),
                )
                for i in range(k)
            ]
        )
        self._follower = Follower(self._route, None)
        self._admin = Admin(self._route, self._follower)
        self._reached = False  # whether an enqueue ever got through (see enqueue_many)

    @classmethod
    def from_url(cls, url: str, namespace: str | None = None, **options: Any) -> Client:
        """A client for ``url``. The client's options (see :class:`Client`) not given are
        read from their ``ROTA_*`` variable (``ROTA_NAMESPACE``, ``ROTA_MAX_ARGS_BYTES``,
        ``ROTA_UNIQUE_TTL``, ``ROTA_DURABLE_ENQUEUE``, ``ROTA_DURABLE_TIMEOUT``,
        ``ROTA_RIDE_THROUGH``, ``ROTA_SHARDS``) when it is set, else their default, as the
        pools read them (a bad value raises a ConfigError naming the variable). Other
        keyword arguments go to the connection, as redis-py's ``Redis.from_url`` takes
        them (``ssl_ca_certs``, ``socket_timeout``, ``username``, ``password``...)."""
        given = {f: options.pop(f, None) for f in _FIELDS - {"namespace"}}
        opts = Options.given(namespace=namespace, **given)
        return cls._connected(opts, url, lambda tag: connect(url, **{**options, "namespace": tag}))

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> Client:
        """A client for the namespace of ``settings``, connected as they say (URL, TLS
        files, ACL user and password: see :mod:`rota.redis.access`); ``options`` go to the
        connection, as in :meth:`from_url`."""
        return cls._connected(
            Options.of(settings),
            settings.redis_url,
            lambda tag: connect_to(settings, **{**options, "namespace": tag}),
        )

    @classmethod
    def _connected(cls, opts: Options, url: str, connect_tag: Callable[[str], Redis]) -> Client:
        """A client of its own connections: in a cluster, one per shard, each to the owner
        of its shard's slot (``connect_tag`` of the shard's tag, the namespace's for the
        first); elsewhere one, as every shard is on the one server."""
        ns, k = opts.namespace, opts.shards
        cluster = url.startswith(CLUSTER)
        others = range(1, k) if cluster else ()
        client = cls(
            connect_tag(ns),
            owns_redis=True,
            shard_redis=[connect_tag(shard_tag(ns, i, k)) for i in others],
            **dataclasses.asdict(opts),
        )
        client._follower.connect = connect_tag if cluster else None
        return client

    @property
    def namespace(self) -> str:
        return self.options.namespace

    @property
    def admin(self) -> Admin:
        """The operator's reads and writes of the namespace (queues, job sets, pools,
        stats, limits), and its shards."""
        return self._admin

    # -- enqueue -----------------------------------------------------------------------

    async def enqueue(
        self,
        name: str,
        /,
        *args: Any,
        unique: str | None = None,
        unique_ttl: float | None = None,
        job_id: str | None = None,
        max_fails: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the job's timeout, not this call's
        after: Sequence[str] = (),
        durable: bool | int | None = None,
        expires_in: float | None = None,
        expires_at: datetime | float | None = None,
        debounce: Debounce | None = None,
        fair_key: str | None = None,
        ordered: bool = False,
        **kwargs: Any,
    ) -> Enqueued:
        """Enqueue a job now. Keyword arguments other than the options are the job's args.

        ``unique``: while a live job holds this key, enqueue nothing and return the
        holder. ``job_id``: use this id; if it exists, enqueue nothing. ``after``: ids
        of jobs that must complete first; the job waits (state ``waiting``) until the
        last of them completes, and ends dead (``dependency_failed``) if one ends dead or
        aborted; a parent that does not exist raises :class:`~rota.JobNotFound`.
        ``durable``: see :meth:`enqueue_many`. ``expires_in`` (seconds from now) or
        ``expires_at`` (a datetime, naive as UTC, or epoch seconds): a job not started
        by then never starts; it ends dead with reason ``expired`` (the handler's
        ``expires_in`` applies when neither is given). ``debounce``: many enqueues of a
        key become one job (:class:`~rota.Debounce`). ``fair_key``: its tenant (see
        :mod:`rota.client.fair`): a name's keys take turns, FIFO within a key.
        ``ordered``: route it by its name, as the client's ``ordered`` names are. Handlers
        whose parameters share an option's name are enqueued with :class:`JobSpec`.
        """
        spec = JobSpec(
            name=name,
            args=args,
            kwargs=kwargs,
            unique=unique,
            unique_ttl=unique_ttl,
            job_id=job_id,
            max_fails=max_fails,
            timeout=timeout,
            after=tuple(after),
            expires_in=expires_in,
            expires_at=expires_at,
            debounce=debounce,
            fair_key=fair_key,
            ordered=ordered,
        )
        return (await self._enqueue([spec], durable))[0]

    async def enqueue_in(self, delay: float, name: str, /, *args: Any, **kwargs: Any) -> Enqueued:
        """Enqueue a job to run ``delay`` seconds from now."""
        return await self._scheduled(
            time.time() + delay_seconds("delay", delay), name, args, kwargs
        )

    async def enqueue_at(
        self, when: datetime | float, name: str, /, *args: Any, **kwargs: Any
    ) -> Enqueued:
        """Enqueue a job to run at ``when``: a datetime (a naive one is UTC, as everywhere
        in rota) or epoch seconds."""
        at = moment_seconds("when", when) if isinstance(when, datetime) else float(when)
        return await self._scheduled(at, name, args, kwargs)

    async def _scheduled(
        self, at: float, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Enqueued:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
        if "after" in options:
            options["after"] = tuple(options["after"])
        spec = JobSpec(name=name, args=args, kwargs=kwargs, run_at=at, **options)
        return (await self._enqueue([spec], None))[0]

    async def enqueue_many(
        self, specs: Iterable[JobSpec], *, durable: bool | int | None = None
    ) -> list[Enqueued]:
        """Enqueue many jobs in one round trip; each is enqueued atomically on its own.

        A single job goes through the ``enqueue`` script; more go through
        ``enqueue_batch``, 50 jobs per call, every call in one pipeline.

        ``durable`` (default: the client's ``durable``, the setting ``durable_enqueue``):
        return only once that many replicas (True: one) hold the jobs, by ``WAIT`` on the
        connection that wrote them; fewer within ``durable_timeout`` seconds raise
        :class:`~rota.NotReplicated` (the jobs are written on the primary; a failover may
        lose them). See "Failover: what can be lost" in docs/operations.md.

        A Redis that is away or refusing ("not now": a restart, a failover, a slot move,
        out of memory) is ridden through for ``ride_through`` seconds (the setting): the
        same jobs are sent again, which enqueues none twice (an id that exists enqueues
        nothing; such a job then reads ``created=False``). After that the call raises
        :class:`~rota.RedisUnavailable` or :class:`~rota.RedisRefused`.
        """
        return await self._enqueue(specs, durable)

    async def _enqueue(
        self, specs: Iterable[JobSpec], durable: bool | int | None, placed: _Placed = None
    ) -> list[Enqueued]:
        """:meth:`enqueue_many`, rows after jobs a caller ``placed`` (by id: the shard)
        going where those are (see :meth:`Shards.by_key`)."""
        specs = list(specs)
        rows = [self._row(spec) for spec in specs]
        chosen = frozenset(s.job_id for s in specs if s.job_id)
        replicas = self.options.durable if durable is None else int(durable)
        timeout = self.options.durable_timeout
        send = (
            traced
            if replicas <= 0 or not rows
            else lambda s, sub: durable_send(s, sub, replicas, timeout)
        )
        try:  # the usual case: it gets through at once
            jobs = await self._follower.send(rows, send, placed, chosen)
        except Exception as exc:
            again = lambda: self._follower.send(rows, send, placed, chosen)  # noqa: E731
            jobs = await riding(again, exc, self.options.ride_through, reached=self._reached)
        self._reached = True
        return jobs

    def _row(
        self, spec: JobSpec, group: str = "", waits_group: str = "", group_size: int = 0
    ) -> EnqueueRow:
        """The row of one job, checked (see :func:`rota.client.spec.to_row`); over several
        shards, with an id that names the shard it is routed to, unless it has one."""
        o = self.options
        row = to_row(spec, o.max_args_bytes, o.unique_ttl, group, waits_group, group_size)
        if spec.name in o.ordered and not row.ordered:
            row = row._replace(ordered=True)
        # Over one shard every id names it: no draw (and no call) per job.
        k = self._route.routing
        return place(row, k) if k > 1 and spec.job_id is None else row

    async def chain(self, specs: Sequence[JobSpec]) -> list[Enqueued]:
        """Enqueue ``specs`` so that each runs after the one before completes (and after its
        own ``after``), in one round trip. A step that ends dead or aborted makes the rest
        dead with reason ``dependency_failed``."""
        route = self._route
        linked, placed = await chained(specs, route.routing, route.holding, self.options.ordered)
        return await self._enqueue(linked, None, placed)

    async def group(
        self,
        specs: Sequence[JobSpec],
        then: JobSpec | None = None,
        *,
        group_id: str | None = None,
    ) -> Group:
        """Enqueue ``specs`` as one group, and ``then`` to run once every member completed
        (dead if one ends dead or aborted); its ``ctx.parent_results`` holds the members'
        results. One round trip whatever the size.

        A group is all its members or none of its callback: it completes only when as many
        members as ``specs`` holds have ended, so a send cut short (the producer killed
        half-way through a large group) leaves it waiting, and the same call again writes
        the members that are missing into the same group, skips those written, and the
        callback runs once, with every result. For that the call must name the same jobs:
        give ``group_id`` (members without a ``job_id`` are then ``<group_id>-<n>``), or a
        ``job_id`` to every member (the group's id is then derived from them). The
        callback without a ``job_id`` is ``<group id>-then``. Without either, each call
        makes a new group.
        """
        gid, rows = group_rows(specs, then, group_id, self._row)
        jobs = await self._follower.send(rows, traced, None)
        return Group(gid, jobs) if then is None else Group(gid, jobs[:-1], jobs[-1])

    # -- a job after its enqueue ------------------------------------------------------

    async def job(self, job_id: str) -> JobRecord | None:
        """The job's record, or None when there is none (never enqueued, or expired)."""
        return await self._route.by_id(job_id, lambda s: s.job(job_id))

    async def job_log(self, job_id: str) -> list[str]:
        """The lines the job's handler kept with ``ctx.job_log`` (the last 100), oldest
        first."""
        return await self._route.by_id(job_id, lambda s: s.job_log(job_id))

    async def wait(self, job_id: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Wait until the job finishes and return its result (None if it returned none).

        No polling: the finish is announced on the job's channel. Raises
        :class:`JobFailed` when it ends dead or aborted, :class:`JobNotFound` when there
        is no such job, and ``TimeoutError`` after ``timeout`` seconds. A job whose handler
        keeps no result (``keep_result=0``) and that finished before the call is gone:
        that is :class:`JobNotFound` too.
        """
        try:
            # Only JobNotFound means missing: a result of None, 0 or [] is an answer.
            read = lambda s: s.wait(job_id, timeout)  # noqa: E731
            return await self._route.by_id(job_id, read, lambda _: False)
        except TimeoutError as exc:
            if str(exc):
                raise
            raise TimeoutError(
                f"job {job_id} did not finish within {timeout} s (it still runs or waits;"
                " wait again, or read it with client.job)"
            ) from None

    async def abort(self, job_id: str, *, keep: float = 3600.0) -> str:
        """Abort a job: a waiting one is removed now, a running one is cancelled by its
        pool within milliseconds. Returns the state the job was in ('missing' if none);
        a job already complete, dead or aborted is left as it is. ``keep``: seconds the
        aborted record stays readable."""
        return await self._route.by_id(
            job_id, lambda s: s.abort(job_id, keep), lambda state: state == "missing"
        )

    async def group_progress(self, group_id: str) -> GroupProgress:
        """The counters of a group (readable for 7 days after its last member finished)."""
        return await self._route.home(group_id).group_progress(group_id)

    # -- the connections ---------------------------------------------------------------

    async def follow_primary(self) -> None:
        """Under Sentinel, until cancelled: leave the old primary the moment the sentinels
        announce a new one, so that no enqueue goes to a server about to be demoted (see
        :mod:`rota.redis.sentinel`). Returns at once for any other Redis. A long-lived producer
        runs it beside its work: ``tg.start_soon(client.follow_primary)``."""
        await follow_primary(self._route.all[0].redis)

    async def close(self) -> None:
        """Close the links; and the redis-py clients too when this client made them."""
        await self._follower.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


for _cls in (Client, Admin, *Admin.PARTS):
    guard_methods(_cls)
for _name in MOVED:
    setattr(Client, _name, moved(_name))
