"""Workflows: chains, groups with a callback, and what a dependent job reads.

A job enqueued ``after`` others waits in state ``waiting`` until the last of them
completes; the script that completes that parent queues it in the same call, so no pool
and no timer is involved (see docs/protocol.md, "Workflows"). On top of that:

- a *chain* is a list of jobs each enqueued after the one before, in one call;
- a *group* is N jobs and an optional callback queued once all N are complete. Each
  member's completion costs O(1): it counts itself in the group's hash, and the member
  that completes the group queues the callback. A member that ends dead or aborted
  makes the callback dead (``dependency_failed``).

:class:`Workflows` is a base of :class:`rota.Client` (as :class:`rota.reads.Reads` is):
the client provides the connection, the keys and the enqueue of rows, so that this
module needs nothing of the client's.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final

import msgspec
from msgspec import Meta

from rota.enqueue import PLACED, Enqueueing
from rota.errors import JobNotFound
from rota.protocol.job import (
    NAME_RE,
    field_int,
    field_seconds,
    field_text,
    new_id,
    reply_text,
    state_text,
)
from rota.protocol.shards import new_id_in, shard_of
from rota.wire.redispy import wrong_type

if TYPE_CHECKING:
    from rota.spec import Enqueued, JobSpec

__all__ = [
    "MISSING",
    "RELATED_FIELDS",
    "Group",
    "GroupProgress",
    "Related",
    "Workflows",
    "pipelined",
    "read_related",
]

#: The state shown for a related job whose record is gone (expired, or deleted).
MISSING: Final = "missing"
#: What is read of a related job (``HMGET``), in the order :func:`read_related` takes.
RELATED_FIELDS: Final = ("name", "state", "enqueued_at")


class Group(msgspec.Struct, frozen=True):
    """What :meth:`Client.group` enqueued: the group's id, its members and its callback."""

    id: str
    jobs: list[Enqueued]
    then: Enqueued | None = None


class GroupProgress(msgspec.Struct, frozen=True):
    """How far a group is: members enqueued, complete, and ended dead or aborted."""

    id: str
    total: int
    done: Annotated[int, Meta(description="members complete")]
    failed: Annotated[int, Meta(description="members that ended dead or aborted")]
    sent: Annotated[
        int,
        Meta(
            description="members written: below total while a send cut short is not"
            " resumed (the same enqueue again writes the rest)"
        ),
    ]
    then: Annotated[str | None, Meta(description="the callback's job id")]
    created_at: Annotated[
        float | None, Meta(description="when it was made, seconds since the epoch")
    ]

    #: The fields of the group's hash it is read from, in the order :meth:`read` takes.
    FIELDS: ClassVar[tuple[str, ...]] = ("total", "done", "failed", "then", "created_at", "sent")

    @classmethod
    def read(cls, group_id: str, values: Sequence[Any] | None) -> GroupProgress | None:
        """The progress from an ``HMGET`` of :attr:`FIELDS` (read leniently: a count that
        is not a number reads as 0); None when the group has no hash."""
        if not values or values[0] is None:
            return None
        total, done, failed, then, created, sent = values
        return cls(
            id=group_id,
            total=field_int(total),
            done=field_int(done),
            failed=field_int(failed),
            sent=field_int(sent),
            then=field_text(then) or None,
            created_at=field_seconds(created) or None,
        )

    @property
    def finished(self) -> bool:
        """Every member complete, dead or aborted."""
        return self.done + self.failed >= self.total

    def as_dict(self) -> dict[str, Any]:
        """The fields and ``finished``, as the JSON API and ``rota group show --json``
        print them."""
        return {**msgspec.structs.asdict(self), "finished": self.finished}


def _no_unique(specs: Sequence[JobSpec], what: str) -> None:
    # A held unique key makes the enqueue return another job's id: the next step would
    # wait for a job that was never created.
    for spec in specs:
        if spec.unique is not None:
            raise ValueError(f"{what}: unique keys are not supported inside a {what}")


def _group_id(specs: Sequence[JobSpec]) -> str:
    """The id of a group whose members all have a ``job_id``, derived from them (the
    same jobs make the same group, so the call can be repeated); a new one otherwise."""
    ids = [s.job_id for s in specs]
    if not all(ids):
        return uuid.uuid4().hex
    digest = hashlib.blake2b(digest_size=16, person=b"rota-group")
    for job_id in ids:
        digest.update(str(job_id).encode() + b"\n")
    return digest.hexdigest()


class Related(msgspec.Struct):
    """A job tied to another one (a parent, a child, a group's member or callback)."""

    id: str
    name: str | None
    state: Annotated[str, Meta(description="'missing' when its record is gone")]


def pipelined(value: Any) -> Any:
    """A reply of a pipeline run with ``raise_on_error=False``: a key of another type
    (WRONGTYPE: not what was asked for) reads as nothing; any other error (Redis
    loading, refusing...) is raised as it would have been."""
    if wrong_type(value):
        return None
    if isinstance(value, Exception):
        raise value
    return value


def read_related(job_id: str, row: Any) -> Related:
    """A related job from a pipelined ``HMGET`` of :data:`RELATED_FIELDS`; ``missing``
    when it has no record (or its key is not a job)."""
    row = pipelined(row)
    if not row or all(v is None for v in row):
        return Related(job_id, None, MISSING)
    return Related(job_id, field_text(row[0]), state_text(row[1], row[0]))


def _decode(text: bytes | str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return reply_text(text)  # written by hand, not JSON: handed over as text


class Workflows(Enqueueing):
    """Chains, groups and what a dependent job reads; a base of :class:`rota.Client`,
    which provides what is declared here. Its jobs go through the client's enqueue
    (:class:`~rota.enqueue.Enqueueing`)."""

    if TYPE_CHECKING:  # rota.sharding.Sharded's: the part whose shard holds a job

        async def part_holding(self, job_id: str) -> Any: ...

    async def chain(self, specs: Sequence[JobSpec]) -> list[Enqueued]:
        """Enqueue ``specs`` so that each runs after the one before completes (and after its
        own ``after``), in one round trip. A step that ends dead or aborted makes the rest
        dead with reason ``dependency_failed``."""
        _no_unique(specs, "chain")
        k = self.shard_count
        linked: list[JobSpec] = []
        previous: str | None = None
        # The shard of each step, by id, and of each job from before that a step waits
        # for first: found where it is (one read each), as its id may name another.
        placed = {p: await self._shard_holding(p) for p in {s.after[0] for s in specs if s.after}}
        for spec in specs:
            after = spec.after if previous is None else (*spec.after, previous)
            # Over several shards a step goes where its first parent is (see
            # rota.protocol.shards), a step before it wherever its id points: an id drawn
            # here names that shard, so that a reader finds the step from its id alone.
            shard = placed.get(after[0], shard_of(after[0], k)) if after else None
            job_id = spec.job_id or (new_id() if shard is None else new_id_in(shard, k))
            placed[job_id] = shard_of(job_id, k) if shard is None else shard
            linked.append(msgspec.structs.replace(spec, job_id=job_id, after=after))
            previous = job_id
        known = PLACED.set(placed)
        try:
            return await self.enqueue_many(linked)
        finally:
            PLACED.reset(known)

    async def _shard_holding(self, job_id: str) -> int:
        """The shard that holds ``job_id`` (the one its id names when none does); 0
        without a read for one shard."""
        if self.shard_count == 1:
            return 0
        return int((await self.part_holding(job_id)).keys.shard)

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
        if not specs:
            raise ValueError("group: give at least one job")
        _no_unique([*specs, *([then] if then else [])], "group")
        if group_id is not None and not (NAME_RE.match(group_id) and len(group_id) <= 100):
            raise ValueError(
                f"group: invalid group id {group_id!r} (up to 100 of A-Z a-z 0-9 _ . : -)"
            )
        gid = group_id or _group_id(specs)
        if group_id is not None:
            specs = [
                s if s.job_id else msgspec.structs.replace(s, job_id=f"{gid}-{i}")
                for i, s in enumerate(specs)
            ]
        rows = [self._enqueue_args(s, group=gid, group_size=len(specs)) for s in specs]
        if len({r.id for r in rows}) < len(rows):
            raise ValueError("group: a job id is given twice")
        if then is not None:
            then = then if then.job_id else msgspec.structs.replace(then, job_id=f"{gid}-then")
            rows.append(self._enqueue_args(then, waits_group=gid))
        jobs = await self._enqueue_rows(rows)
        if then is None:
            return Group(gid, jobs)
        return Group(gid, jobs[:-1], jobs[-1])

    async def related(self, ids: Sequence[str]) -> list[Related]:
        """Each job's name and state, in one round trip."""
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(self.keys.job(job_id), *RELATED_FIELDS)
        rows = await pipe.execute(raise_on_error=False)
        return [read_related(i, row) for i, row in zip(ids, rows, strict=True)]

    async def group_progress(self, group_id: str) -> GroupProgress:
        """The counters of a group (readable for 7 days after its last member finished)."""
        raw = await self.redis.hmget(self.keys.group(group_id), GroupProgress.FIELDS)
        progress = GroupProgress.read(group_id, raw)
        if progress is None:
            raise JobNotFound(f"no group {group_id!r} (never enqueued, or expired)")
        return progress

    async def group_members(self, group_id: str, offset: int = 0, count: int = 100) -> list[str]:
        """Ids of a group's members, in the order they were enqueued."""
        raw = await self.redis.lrange(self.keys.group_members(group_id), offset, offset + count - 1)
        return [reply_text(r) for r in raw]

    async def dependency_results(self, job_id: str) -> dict[str, Any]:
        """The results of the jobs ``job_id`` waited for, by id: its parents' (copied into
        its record as each completed) in the order of ``after``, then, for a group's
        callback, the members' in the order they were enqueued."""
        key = self.keys.job(job_id)
        reply = await self.conn.execute_command("HGETALL", key)  # no pool checkout per job
        # A Link answers the flat list of the wire, redis-py a dict.
        pairs = (
            reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
        )
        raw = {reply_text(k): v for k, v in pairs}
        out = {
            p: _decode(raw["r:" + p])
            for p in reply_text(raw.get("after", b"")).split()
            if "r:" + p in raw
        }
        out.update({k[2:]: _decode(v) for k, v in raw.items() if k.startswith("r:")})
        gid = raw.get("waits_group")
        if gid:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.lrange(self.keys.group_members(reply_text(gid)), 0, -1)
                pipe.hgetall(self.keys.group_results(reply_text(gid)))
                order, results = await pipe.execute()
            members = {reply_text(k): v for k, v in results.items()}
            out.update(
                {
                    reply_text(m): _decode(members[reply_text(m)])
                    for m in order
                    if reply_text(m) in members
                }
            )
        return out

    async def children(self, job_id: str) -> list[str]:
        """Ids of the jobs enqueued after ``job_id`` (kept as long as its record)."""
        return sorted(reply_text(m) for m in await self.redis.smembers(self.keys.children(job_id)))
