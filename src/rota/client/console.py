"""The operator's console writes and the window reads of the job sets, by name: edit a
job's args then retry it, run a periodic job now, and a page of a job set ordered by
its time and cut to a window of it. Each takes the client (as
:mod:`rota.client.admin_reads` does), so that the web and the CLI reach Redis through
the client only; :class:`rota.client.admin.Admin` is full.

**Edit then retry** changes the job in place: one script (``edit.lua``) checks that the
job is still in its set, replaces its args and queues it, or writes nothing. The job
keeps its id, its ties (parents, children, group), its options and its history, so a
workflow that waits for it goes on; a job that left the set meanwhile (a pool promoted
the retry, another operator retried or deleted it) is refused, as the edit was made
on what is gone.

**Run a periodic job now** enqueues one run with the args its pools give it, under the
id a fire time of the current second would have (``cron:<name>:<second, ms>``), after
claiming that second's claim key as the schedule's pools do. The schedule is not
touched: its next fire time comes as planned. A run now in the same second as a fire
time is that fire time's run (whichever claims first enqueues it; the other gets its
id), and two runs now in one second are one job; at any other moment it is a run of
its own.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from rota.client.finished import MAX_COUNT, MAX_OFFSET, TIME_MAX, Order
from rota.client.routing import Shards
from rota.client.spec import Enqueued, JobSpec
from rota.client.status import Page, QueueInfo
from rota.errors import JobNotFound, PayloadTooLarge
from rota.protocol import codec, operator_calls
from rota.protocol.bounds import Bound, checked
from rota.protocol.job import JobSet, field_int, now_ms, reply_text, validate_name

if TYPE_CHECKING:
    from rota.client import Client
    from rota.client.shard import Shard

__all__ = [
    "CLAIM_HOLDER",
    "EDITABLE",
    "QUEUE_ORDERS",
    "Editable",
    "NoPeriodicJob",
    "QueueOrder",
    "default_order",
    "queue_page",
    "retry_edited",
    "run_periodic",
    "window",
]

Editable = Literal["retry", "dead"]
#: The sets whose jobs can be edited then retried: jobs that failed.
EDITABLE: Final[tuple[Editable, ...]] = ("retry", "dead")
#: What a run now writes in the claim key of its second (a pool writes its id).
CLAIM_HOLDER: Final = "console"
#: How long a run now's claim is kept: as a pool's, an hour.
_CLAIM_MS: Final = 3_600_000
_REFUSED: Final = {
    -2: "has no record or no job name: it cannot run",
    -3: "ended dead because a job it waits for failed (dependency_failed): retry that job",
}


QueueOrder = Literal["busy", "name", "size", "running", "latency"]
#: The orders of the queues' list: the busiest (queued and running) first, by name,
#: the most queued, the most running, the oldest queued job first.
QUEUE_ORDERS: Final[tuple[QueueOrder, ...]] = ("busy", "name", "size", "running", "latency")


class NoPeriodicJob(LookupError):
    """No live pool fires a periodic job of that name."""


def default_order(which: JobSet) -> Order:
    """The order a set's page takes by default: the dead newest first (the latest
    deaths), the others oldest first (the next due, the longest waiting)."""
    return "newest" if which == "dead" else "oldest"


async def window(
    client: Client,
    which: JobSet,
    *,
    since: float | None = None,
    until: float | None = None,
    order: Order | None = None,
    offset: int = 0,
    count: int = 50,
) -> Page:
    """A page of a job set whose time (its score: due time for scheduled and retry,
    time of death for dead, since when for waiting) is from ``since`` to ``until``
    (epoch seconds, both included; None: no bound), newest or oldest first (None: the
    set's own order, :func:`default_order`). Each shard reads its first ``offset +
    count`` entries of the window (``ZRANGEBYSCORE ... LIMIT``) and counts it
    (``ZCOUNT``), one round trip, then the page's records: ``offset`` is at most
    1,000,000 and ``count`` 1 to 1,000, so a read stays bounded."""
    checked("offset", offset, Bound(0, MAX_OFFSET, whole=True))
    checked("count", count, Bound(1, MAX_COUNT, whole=True))
    for bound, at in (("since", since), ("until", until)):
        if at is not None:
            checked(bound, at, Bound(0, TIME_MAX))
    order = default_order(which) if order is None else order
    if order not in ("newest", "oldest"):
        raise ValueError(f"order: 'newest' or 'oldest', not {order!r}")
    lo = "-inf" if since is None else math.floor(since * 1000)
    hi = "+inf" if until is None else math.floor(until * 1000)
    desc = order == "newest"
    route = Shards(client.admin.shards)

    async def read(s: Shard) -> tuple[int, list[tuple[float, str]]]:
        z = s.set_key(which)
        pipe = s.redis.pipeline(transaction=False)
        pipe.zcount(z, lo, hi)
        if desc:
            pipe.zrevrangebyscore(z, hi, lo, start=0, num=offset + count, withscores=True)
        else:
            pipe.zrangebyscore(z, lo, hi, start=0, num=offset + count, withscores=True)
        total, rows = await pipe.execute()
        return int(total), [(float(score), reply_text(i)) for i, score in rows]

    each = await route.each(read)
    rows = heapq.merge(
        *([(score, job_id, i) for score, job_id in got] for i, (_, got) in enumerate(each)),
        key=lambda r: (-r[0] if desc else r[0], r[1]),
    )
    chosen = [(i, job_id) for _, job_id, i in list(rows)[offset : offset + count]]
    found = await route.each(lambda s: s.records([j for i, j in chosen if i == s.index]))
    records = {r.id: r for got in found for r in got}
    jobs = [records[j] for _, j in chosen if j in records]
    return Page(sum(t for t, _ in each), offset, jobs)


async def retry_edited(client: Client, which: Editable, job_id: str, args: Any) -> None:
    """Replace the args of job ``job_id`` of the retry or dead set with ``args`` (a list:
    positional args; a dict: keyword args) and queue it now, in one step (see the
    module). Raises :class:`~rota.JobNotFound` when the job is not in the set (nothing
    written), ``ValueError`` when it cannot run with new args, ``TypeError`` for args
    JSON would change, :class:`~rota.PayloadTooLarge` past ``max_args_bytes``."""
    if which not in EDITABLE:
        raise ValueError(f"only retry and dead jobs are edited then retried, not {which!r}")
    if isinstance(args, list):
        payload = codec.encode_args(tuple(args), {})
    elif isinstance(args, dict):
        payload = codec.encode_args((), args)
    else:
        raise TypeError(f"args: a JSON array or object, not {type(args).__name__}")
    limit = client.options.max_args_bytes
    if len(payload) > limit:
        raise PayloadTooLarge(
            f"args of job {job_id} are {len(payload)} bytes encoded, over the limit of {limit}"
        )
    shard = await client.admin.shard_holding(job_id)
    done = await operator_calls.edit(shard.scope, which, job_id, payload)
    if done == -1:
        raise JobNotFound(f"job {job_id} is not among the {which} jobs (any more): nothing changed")
    if done != 1:
        raise ValueError(f"job {job_id} {_REFUSED.get(done, 'was refused')}: nothing changed")


async def run_periodic(client: Client, name: str, *, now: float | None = None) -> Enqueued:
    """Enqueue one run of the periodic job ``name`` now, with the args its live pools
    give it, the schedule untouched (see the module for when it coincides with a fire
    time). Raises :class:`NoPeriodicJob` when no live pool fires it. A job turned off
    runs too: the switch stops its fire times, not an operator's run."""
    validate_name(name)
    fired = [c for p in await client.admin.pools() if not p.stale for c in p.periodic]
    entry = next((c for c in fired if c.name == name), None)
    if entry is None:
        raise NoPeriodicJob(f"no live pool fires a periodic job {name!r}")
    args = codec.parse_input(entry.args) if entry.args else []
    second = int(time.time() if now is None else now) * 1000
    job_id = f"cron:{name}:{second}"
    first = client.admin.shards[0]
    claim = first.keys.cron(f"{name}:{second}")
    # Claimed already: by the pool that fired this second, or by a run now in it (whose
    # job may be gone already, its result not kept): that run is the one.
    if not await first.redis.set(claim, CLAIM_HOLDER, nx=True, px=_CLAIM_MS):
        return Enqueued(job_id, name, created=False)
    spec = _spec(name, args, job_id)
    return (await client.enqueue_many([spec]))[0]


def _spec(name: str, args: Any, job_id: str) -> JobSpec:
    positional: Sequence[Any] = args if isinstance(args, list) else ()
    keywords: dict[str, Any] = args if isinstance(args, dict) else {}
    return JobSpec(name=name, args=tuple(positional), kwargs=keywords, job_id=job_id)


async def queue_page(
    client: Client, by: QueueOrder = "busy", offset: int = 0, count: int = 100
) -> tuple[int, list[QueueInfo]]:
    """How many job names there are, and the figures of a page of them in the order
    ``by`` (:data:`QUEUE_ORDERS`; ties by name). Every order but ``latency`` sorts on
    what :meth:`Admin.queue_page` reads already (each name's queued and running count,
    one round trip per shard); ``latency`` also reads the oldest queued id of each name
    that has queued jobs and its enqueue time (two more round trips per shard).
    ``offset`` is at most 10^9, ``count`` 1 to 1,000."""
    checked("offset", offset, Bound(0, 10**9, whole=True))
    checked("count", count, Bound(1, MAX_COUNT, whole=True))
    if by == "busy":
        return await client.admin.queue_page(offset, count)
    if by not in QUEUE_ORDERS:
        raise ValueError(f"order: one of {', '.join(QUEUE_ORDERS)}, not {by!r}")
    names = await client.admin.names()
    counts = await client.admin.backlog(names)
    if by == "latency":
        waiting = [n for n in names if counts[n][0]]
        route = Shards(client.admin.shards)
        found = await route.each(lambda s: _oldest(s, waiting))
        first: dict[str, int] = {}
        for f in found:
            for n, at in f.items():
                first[n] = min(at, first.get(n, at))
        now = now_ms()  # the oldest first; the names without a queued job after them
        keys = {n: ((first[n] - now) if n in first else 1, n) for n in names}
    else:
        column = {"size": 0, "running": 1}.get(by)
        keys = {n: (0 if column is None else -counts[n][column], n) for n in names}
    ordered = sorted(names, key=keys.__getitem__)
    return len(names), await client.admin.queues(ordered[offset : offset + count])


async def _oldest(s: Shard, names: Sequence[str]) -> dict[str, int]:
    """The enqueue time (ms) of the oldest job in each of ``names``' queue list in one
    shard (a name whose list is empty there, or whose record is not a hash: left out)."""
    # On the hot path's connection, as Shard.backlog: redis-py's pipeline costs ~20 µs a
    # command, 1.1 s for 5,000 names; an error reply (no list, no hash) comes in place.
    if not names:
        return {}
    ids = await s.conn.execute_many([("LINDEX", s.keys.queue(n), -1) for n in names])
    held = [(n, reply_text(i)) for n, i in zip(names, ids, strict=True) if isinstance(i, bytes)]
    times = await s.conn.execute_many([("HGET", s.keys.job(i), "enqueued_at") for _, i in held])
    out = {}
    for (n, _), t in zip(held, times, strict=True):
        at = field_int(t) if isinstance(t, bytes | str) else None
        if at:
            out[n] = at
    return out
