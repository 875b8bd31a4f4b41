"""What the operator's reads return: a queue's figures, the jobs running now, a page of
a job set, stats buckets, the live pools. Each shard builds them from Redis
(:mod:`rota.client.shard_ops`), :class:`rota.Admin` merges them, the CLI and the web UI
show them.

Times are floats in seconds since the epoch, as in :class:`rota.JobRecord`. Redis holds
them in ms (lease scores, stats bucket names, the pools' snapshots), and so does the web
JSON API: they are turned into seconds here, where they are read, and back into ms only
by what writes that JSON.
"""

from __future__ import annotations

import math
from typing import Annotated

import msgspec
from msgspec import Meta

from rota.protocol.job import JobRecord
from rota.protocol.snapshot import PoolIdentity, PoolSnapshot

__all__ = [
    "Bucket",
    "CronEntry",
    "History",
    "LivePool",
    "Page",
    "PoolJob",
    "QueueInfo",
    "RunningJob",
    "duration",
]


class QueueInfo(msgspec.Struct, frozen=True):
    """Figures of one job name's queue. ``latency`` is the age in seconds of its oldest
    queued job (0 when empty); ``rate``: its rate limit as written (``"100/s"``)."""

    name: str
    size: int
    latency: Annotated[float, Meta(description="age in seconds of the oldest queued job")]
    running: int
    limit: int | None
    paused: bool
    priority: int | None
    rate: Annotated[str | None, Meta(description="its rate limit, e.g. '100/s'")] = None


class RunningJob(msgspec.Struct, frozen=True):
    """A job running now, read from the running sets and its record. ``since``: the
    start of its current lease; ``deadline``: when the lease ends unless its pool
    extends it (both in seconds since the epoch); ``progress``: what the handler last
    reported with ``ctx.progress``; ``message``: its last ``ctx.checkin``, as its pool's
    latest snapshot tells it; ``heard_at``: its last sign of life (a checkin or a
    progress report, as that snapshot tells it, else its start): how long it has been
    silent, which a handler's ``idle_timeout`` bounds."""

    job_id: str
    name: str
    pool: str
    since: Annotated[float, Meta(description="start of the current lease")]
    deadline: Annotated[float, Meta(description="end of the lease unless its pool extends it")]
    progress: Annotated[str, Meta(description="the handler's last ctx.progress")] = ""
    message: Annotated[str, Meta(description="its last checkin, from its pool's snapshot")] = ""
    heard_at: Annotated[
        float,
        Meta(description="its last checkin or progress (from its pool's snapshot), else its start"),
    ] = 0.0

    @property
    def host(self) -> str:
        """The host of the pool running it (a pool id is ``host:pid:suffix``)."""
        return self.pool.rsplit(":", 2)[0] if self.pool.count(":") >= 2 else self.pool

    @property
    def pid(self) -> int:
        parts = self.pool.rsplit(":", 2)
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


class Page(msgspec.Struct, frozen=True):
    """One page of a job set, newest first for dead jobs, soonest first otherwise."""

    total: int
    offset: int
    jobs: list[JobRecord]


class Found(msgspec.Struct, frozen=True):
    """A page of the jobs of a set whose id or name contains a text: ``total`` of them
    among the jobs of the set from position ``start`` up to ``searched`` (in the order
    of :class:`Page`), which holds ``size``; the search covered the whole set when it
    started at 0 and ``searched == size``, and goes on from ``searched`` otherwise."""

    total: int
    offset: int
    jobs: list[JobRecord]
    searched: int
    size: int
    start: int = 0

    @property
    def complete(self) -> bool:
        return self.start == 0 and self.searched >= self.size


class Bucket(msgspec.Struct, frozen=True):
    """The counters of one UTC minute or day, starting at ``start`` (seconds since the
    epoch): ``processed``, ``failed``, ... and ``processed:<name>``, ... as stored; empty
    when nothing ran."""

    start: float
    counts: dict[str, int]


class History(msgspec.Struct, frozen=True):
    """Stats buckets, oldest first; the last one is the current minute or day."""

    minutes: list[Bucket]
    days: list[Bucket]


class PoolJob(msgspec.Struct, frozen=True):
    """A job a live pool is running, as its latest snapshot tells
    (:class:`rota.protocol.snapshot.BusyWorker`), its times in seconds since the epoch."""

    job_id: str
    name: str
    since: float
    message: str = ""
    heard_at: float = 0.0


class CronEntry(msgspec.Struct, frozen=True):
    """A periodic job as a pool fires it: its cron expression and zone, its next fire
    time and the last one the pool saw come (None: none since it started). Seconds
    since the epoch."""

    name: str
    cron: str
    tz: str
    next_at: float
    last_at: float | None = None
    args: Annotated[str, Meta(description="its runs' args, JSON text as stored")] = ""


class LivePool(PoolIdentity, frozen=True, kw_only=True):
    """A live pool: what its latest snapshot says (``started_at``, ``heartbeat_at``:
    when it wrote it), the time of its last heartbeat, and whether it is stale (no
    heartbeat for more than two of its intervals: stopped, or stuck). Times in seconds
    since the epoch; ``heartbeat_interval`` in seconds."""

    started_at: float
    heartbeat_at: float
    heartbeat_interval: float
    busy: list[PoolJob] = msgspec.field(default_factory=list)
    periodic: list[CronEntry] = msgspec.field(default_factory=list)
    last_heartbeat: float
    stale: Annotated[bool, Meta(description="no heartbeat for over 2 intervals")]
    state: Annotated[
        str,
        Meta(description="running, quieting, quiet or stopping, as the pool said last"),
    ] = "running"

    @classmethod
    def read(cls, snapshot: PoolSnapshot, last_heartbeat_ms: int, stale: bool) -> LivePool:
        """The live pool of a snapshot as stored (times in ms)."""
        s = snapshot
        return cls(
            **{f: getattr(s, f) for f in PoolIdentity.__struct_fields__},
            started_at=s.started_at / 1000,
            heartbeat_at=s.heartbeat_at / 1000,
            busy=[
                PoolJob(b.job_id, b.name, b.since / 1000, b.message, b.heard_at / 1000)
                for b in s.busy
            ],
            heartbeat_interval=s.heartbeat_interval,
            periodic=[
                CronEntry(
                    c.name, c.cron, c.tz, c.next_at / 1000, (c.last_at / 1000) or None, c.args
                )
                for c in s.periodic
            ],
            last_heartbeat=last_heartbeat_ms / 1000,
            stale=stale,
            state=s.state,
        )


def duration(seconds: float) -> str:
    """A span of time for people, as the web UI and the CLI show it: 4.2s, 3m12s,
    2h05m, 3d04h (-4.2s for a negative one)."""
    if not math.isfinite(seconds):  # a stored time that names none
        return "?"
    negative, seconds = seconds < 0, abs(seconds)
    s = int(seconds)
    if s < 60:
        text = f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    elif s < 3600:
        text = f"{s // 60}m{s % 60:02d}s"
    elif s < 86400:
        text = f"{s // 3600}h{s % 3600 // 60:02d}m"
    else:
        text = f"{s // 86400}d{s % 86400 // 3600:02d}h"
    return "-" + text if negative else text
