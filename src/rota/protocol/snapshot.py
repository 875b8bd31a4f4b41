"""The JSON snapshot a pool writes at each heartbeat (``{ns}:pool:<id>``)."""

from __future__ import annotations

import msgspec

__all__ = ["POOL_STATES", "BusyWorker", "PoolIdentity", "PoolSnapshot", "Schedule"]

#: What a pool's snapshot says it is doing: ``running`` (fetching), ``quieting`` (told to
#: be quiet, a fetch of its still under way), ``quiet`` (fetches nothing, finishes what
#: runs), ``stopping`` (draining before it leaves). A snapshot without one is running.
POOL_STATES = ("running", "quieting", "quiet", "stopping")


class BusyWorker(msgspec.Struct, frozen=True):
    """A job a pool is running: since when, the last checkin message, and the last
    sign of life (a checkin or a progress report; 0: none since it started)."""

    job_id: str
    name: str
    since: int
    message: str = ""
    heard_at: int = 0


class Schedule(msgspec.Struct, frozen=True):
    """A periodic job a pool fires: its cron expression as written (and its zone), the
    next fire time, and the last one this pool saw come (0: none yet). Times in ms.
    ``args``: the args each run gets, JSON text as stored (empty from pools before it
    was published): what a run enqueued from the console (``rota cron run``) is given."""

    name: str
    cron: str
    tz: str
    next_at: int
    last_at: int = 0
    args: str = ""


class PoolIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """Who a pool is and what it serves: the first fields of its snapshot, of rota's
    ``LivePool`` and of the web API's pool, which differ in how they carry times."""

    id: str
    host: str
    pid: int
    version: str
    namespace: str
    concurrency: int
    jobs: list[str]


class PoolSnapshot(PoolIdentity, frozen=True, kw_only=True):
    """What a pool tells the others and the UI about itself. Times in ms."""

    started_at: int
    heartbeat_at: int
    heartbeat_interval: float  # seconds
    busy: list[BusyWorker] = msgspec.field(default_factory=list)
    periodic: list[Schedule] = msgspec.field(default_factory=list)
    #: One of :data:`POOL_STATES`: how the pool acknowledges an operator's command.
    state: str = "running"
    #: The tags of the shards where the pool's heartbeat runs (None: a pool that does
    #: not say): ``rota shards resize`` waits until none lists a retired one.
    shards: list[str] | None = None
