"""What the operator's reads return: a queue's figures, the jobs running now, a page of
a job set, stats buckets, the live pools. :class:`rota.operations.Operations` builds them
from Redis; the CLI and the web UI show them.
"""

from __future__ import annotations

import msgspec

from rota.protocol.job import JobRecord
from rota.protocol.snapshot import PoolSnapshot

__all__ = ["Bucket", "History", "LivePool", "Page", "QueueInfo", "RunningJob"]


class QueueInfo(msgspec.Struct, frozen=True):
    """Figures of one job name's queue. ``latency`` is the age in seconds of its oldest
    queued job (0 when empty); ``rate``: its rate limit as written (``"100/s"``)."""

    name: str
    size: int
    latency: float
    running: int
    limit: int | None
    paused: bool
    priority: int | None
    rate: str | None = None


class RunningJob(msgspec.Struct, frozen=True):
    """A job running now, read from the running sets and its record. ``since``: the
    start of its current lease (ms); ``deadline``: when the lease ends unless its pool
    extends it (ms); ``progress``: what the handler last reported with ``ctx.progress``;
    ``message``: its last ``ctx.checkin``, as its pool's latest snapshot tells it."""

    job_id: str
    name: str
    pool: str
    since: int
    deadline: int
    progress: str = ""
    message: str = ""

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


class Bucket(msgspec.Struct, frozen=True):
    """The counters of one UTC minute or day, starting at ``start`` (ms): ``processed``,
    ``failed``, ... and ``processed:<name>``, ... as stored; empty when nothing ran."""

    start: int
    counts: dict[str, int]


class History(msgspec.Struct, frozen=True):
    """Stats buckets, oldest first; the last one is the current minute or day."""

    minutes: list[Bucket]
    days: list[Bucket]


class LivePool(PoolSnapshot, frozen=True, kw_only=True):
    """A live pool: its latest snapshot, the time (ms) of its last heartbeat, and whether
    it is stale (no heartbeat for more than two of its intervals: stopped, or stuck)."""

    last_heartbeat: int
    stale: bool
