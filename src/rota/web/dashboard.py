"""The namespace at a glance: the dashboard's totals and history, the live pools, the
jobs running now, and Redis's own figures."""

from __future__ import annotations

import time
from collections import Counter
from typing import Annotated, Any, ClassVar, Final

import msgspec
from starlette.requests import Request

from rota import inspect
from rota.client.status import LivePool, RunningJob
from rota.inspect import ServerInfo
from rota.inspect.figures import MINUTES, leased_names, queue_totals, stats_totals, totals_history
from rota.protocol.snapshot import PoolIdentity
from rota.web.base import client_of, state_of
from rota.web.charts import bar_chart
from rota.web.declare import Ms, Number, Routes, mirror, said

__all__ = ["BusyWorker", "Pool", "routes"]

routes = Routes()
_MINUTES: Final = Number("minutes", MINUTES, 1, 120)
_DAYS: Final = Number("days", 30, 1, 90)
#: The counters since the namespace began that the dashboard shows (of the stats hash,
#: which holds five more fields for every job name: read by name, not whole).
_TOTALS: Final = ("processed", "failed", "dead", "lost", "aborted")


class Bucket(msgspec.Struct):
    """One UTC minute or day of the dashboard's history."""

    start: Ms
    processed: int
    failed: int


class Dashboard(msgspec.Struct):
    namespace: str
    totals: dict[str, int]
    sizes: dict[str, int]
    minutes: list[Bucket]
    days: list[Bucket]


class Pool(PoolIdentity, frozen=True, kw_only=True):
    """A live pool: rota's ``LivePool``, its times in ms."""

    mirrors: ClassVar[type[msgspec.Struct]] = LivePool

    started_at: Ms
    heartbeat_at: Ms
    heartbeat_interval: float
    # The snapshot's list of busy workers is replaced by their number, counted from the
    # running sets (exact at the read); ``/api/busy`` lists them.
    busy: Annotated[int, said("jobs it is running now")]
    periodic: Annotated[list[str], said("the names of the periodic jobs it fires (see /api/cron)")]
    last_heartbeat: Ms
    stale: bool
    state: Annotated[str, said("running, quieting, quiet or stopping, as the pool said last")]
    told: Annotated[
        str | None,
        said("what an operator told it and it has not left: quiet or stop (see /api/pools/{id})"),
    ] = None


class Pools(msgspec.Struct):
    pools: list[Pool]
    heartbeat_interval: float


class BusyWorker(msgspec.Struct, kw_only=True):
    """A job running now: rota's ``RunningJob``, its times in ms, and the host and pid of
    its pool."""

    mirrors: ClassVar[type[msgspec.Struct]] = RunningJob

    job_id: str
    name: str
    pool: str
    since: Ms
    deadline: Ms
    progress: str
    message: str
    heard_at: Ms
    host: str
    pid: int
    silent: Annotated[float, said("seconds since its last checkin or progress, else its start")]


class Busy(msgspec.Struct):
    workers: list[BusyWorker]


class Redis(ServerInfo):
    namespace: str


async def _charts(request: Request, data: Any) -> dict[str, Any]:
    return {"charts": {k + "s": bar_chart(data[k + "s"], k) for k in ("minute", "day")}}


@routes.page("/", "dashboard.html", _charts, api="/api/dashboard")
@routes.api("/api/dashboard", "dashboard", Dashboard, params=(_MINUTES, _DAYS))
async def dashboard(request: Request) -> Dashboard:
    """Totals, sizes, and processed/failed per minute and per day."""
    client = client_of(request)
    stats = await stats_totals(client, _TOTALS)
    history = await totals_history(client, _MINUTES.read(request), _DAYS.read(request))
    queued, running = await queue_totals(client)
    sizes = {"queued": queued, "running": running, **await client.admin.job_set_sizes()}
    sizes.update(pools=len(await client.admin.pools()), busy=running)
    totals = {k: stats.get(k, 0) for k in _TOTALS}
    minutes, days = ([_bucket(x) for x in seen] for seen in (history.minutes, history.days))
    return Dashboard(client.namespace, totals, sizes, minutes, days)


def _bucket(x: Any) -> Bucket:
    return mirror(
        Bucket, x, processed=x.counts.get("processed", 0), failed=x.counts.get("failed", 0)
    )


@routes.page("/pools", "pools.html")
@routes.api("/api/pools", "pools", Pools)
async def pools(request: Request) -> Pools:
    """Live pools and their heartbeats."""
    client = client_of(request)
    live = await client.admin.pools()
    busy = Counter(r.pool for r in await client.admin.running(await leased_names(client), live))
    told = await client.admin.commands.read()
    out = [
        mirror(Pool, p, busy=busy[p.id], periodic=[c.name for c in p.periodic], told=told.get(p.id))
        for p in live
    ]
    return Pools(out, state_of(request).settings.heartbeat_interval)


@routes.page("/busy", "busy.html")
@routes.api("/api/busy", "busy", Busy)
async def busy(request: Request) -> Busy:
    """Jobs running now, from the running sets."""
    # exact at the read; only the last checkin message comes from the pools' snapshots
    client = client_of(request)
    running = await client.admin.running(await leased_names(client))
    now = time.time()
    return Busy([mirror(BusyWorker, r, silent=_silent(now, r.heard_at)) for r in running])


def _silent(now: float, heard_at: float) -> float:
    """Seconds since ``heard_at``, to the tenth (never below 0: clocks of two hosts)."""
    return round(max(0.0, now - heard_at), 1)


@routes.page("/redis", "redis.html")
@routes.api("/api/redis", "redis", Redis)
async def redis_info(request: Request) -> Redis:
    """Redis server figures and round trip."""
    client = client_of(request)
    found = await inspect.server_info(client)  # INFO, and one PING's round trip here
    return mirror(Redis, found, namespace=client.namespace)
