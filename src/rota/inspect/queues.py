"""The jobs waiting in a queue, a page at a time, and the job names a live pool serves
(see :mod:`rota.inspect`)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec
from msgspec import Meta

from rota.client import admin_reads, queue_pages
from rota.client.rules import gather
from rota.client.shard import Shard
from rota.client.workflow import MISSING
from rota.protocol.job import field_seconds, field_text, state_text
from rota.redis.outage import guarded

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["QueueView", "QueuedJob", "queue_view", "served_names"]

#: The most characters of a queued job's args a queue's view holds, and the longest args
#: read for that (longer ones are a read of the job away: a page of big jobs stays cheap).
ARGS_PREVIEW: Final = 200
ARGS_READ: Final = 4096


class QueuedJob(msgspec.Struct, kw_only=True):
    """A job waiting in a queue: ``args`` is their start, None when too long to read."""

    id: str
    name: str | None
    state: Annotated[str, Meta(description="'missing' when its record is gone")]
    enqueued_at: float | None
    args: Annotated[str | None, Meta(description="their start; null when too long to read")]
    args_bytes: Annotated[int, Meta(description="the length of the args as stored")]


class QueueView(msgspec.Struct, kw_only=True):
    """A page of the jobs waiting in one queue."""

    name: str
    order: Literal["oldest", "newest"]
    total: Annotated[int, Meta(description="jobs in the queue")]
    keyed: Annotated[
        int, Meta(description="jobs with a fair key, waiting in their keys (not in jobs)")
    ] = 0
    offset: int
    limit: int
    paused: bool
    served: Annotated[bool, Meta(description="a live pool serves this name")]
    jobs: list[QueuedJob]


async def served_names(client: Client) -> set[str]:
    """The job names some live pool serves (its jobs wait for one while none does)."""
    return {name for pool in await client.admin.pools() for name in pool.jobs}


@guarded
async def queue_view(
    client: Client, name: str, offset: int = 0, limit: int = 25, newest: bool = False
) -> QueueView:
    """A page of the jobs waiting in ``name``'s queue, the next to run first (or the
    newest first). A queue's list has its newest job at the head, so a page is one
    ``LRANGE`` counted from the end it starts at (cheap deep into a long queue), then
    the page's records: their fields and the length of their args, then the args that
    are short enough to show (three round trips whatever the queue's length).

    Over several shards, the shards' jobs merged by the time they were enqueued, each
    shard's in its list's order, exactly at any depth (see
    :class:`rota.client.pages.ListSide`), then the page's records in the shards that
    hold them (two round trips each, all at once)."""
    served = name in await served_names(client)
    shards = client.admin.shards
    if len(shards) == 1:
        return await _shard_queue(shards[0], name, offset, limit, newest, served)
    sizes, paused, keyed, chosen = await queue_pages.queue_page(
        shards, name, offset, limit, newest=newest
    )
    each = await gather(
        [
            functools.partial(
                admin_reads.queued_rows, s, [j for i, j in chosen if i == s.index], ARGS_READ
            )
            for s in shards
        ]
    )
    rows = {row[0]: _job(row) for part in each for row in part}
    return QueueView(
        name=name,
        order="newest" if newest else "oldest",
        total=sum(sizes),
        keyed=keyed,
        offset=offset,
        limit=limit,
        paused=paused,
        served=served,
        jobs=[rows[j] for _, j in chosen],
    )


def _job(row: admin_reads.QueuedRow) -> QueuedJob:
    """A queued job's row as the view shows it."""
    i, job_name, state, enqueued, size, args = row
    text = field_text(args)
    gone = job_name is None and state is None
    return QueuedJob(
        id=i,
        name=field_text(job_name),
        state=MISSING if gone else state_text(state, job_name),
        enqueued_at=field_seconds(enqueued) or None,
        args=None if text is None else text[:ARGS_PREVIEW],
        args_bytes=size,
    )


async def _shard_queue(
    shard: Shard, name: str, offset: int, limit: int, newest: bool, served: bool
) -> QueueView:
    """:func:`queue_view` of one shard."""
    total, paused, rows, keyed = await admin_reads.queue_rows(
        shard, name, offset, limit, newest, ARGS_READ
    )
    jobs = [_job(row) for row in rows]
    return QueueView(
        name=name,
        order="newest" if newest else "oldest",
        total=total,
        keyed=keyed,
        offset=offset,
        limit=limit,
        paused=paused,
        served=served,
        jobs=jobs,
    )
