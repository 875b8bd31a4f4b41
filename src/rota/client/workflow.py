"""Workflows: chains, groups with a callback, and what a dependent job reads.

A job enqueued ``after`` others waits in state ``waiting`` until the last of them
completes; the script that completes that parent queues it in the same call, so no pool
and no timer is involved (see docs/protocol.md, "Workflows"). On top of that:

- a *chain* is a list of jobs each enqueued after the one before, in one call;
- a *group* is N jobs and an optional callback queued once all N are complete. Each
  member's completion costs O(1): it counts itself in the group's hash, and the member
  that completes the group queues the callback. A member that ends dead or aborted
  makes the callback dead (``dependency_failed``).

:class:`rota.Client` enqueues them: this module makes their jobs' specs and rows (and
holds the types a workflow's reads return), so that it needs nothing of the client's.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final

import msgspec
from msgspec import Meta

from rota.protocol.job import (
    NAME_RE,
    field_int,
    field_seconds,
    field_text,
    new_id,
    reply_text,
    state_text,
)
from rota.protocol.rows import EnqueueRow
from rota.protocol.shards import new_id_in, shard_of
from rota.wire.redispy import wrong_type

if TYPE_CHECKING:
    from rota.client.spec import Enqueued, JobSpec

__all__ = [
    "MISSING",
    "RELATED_FIELDS",
    "Group",
    "GroupProgress",
    "Related",
    "chained",
    "decoded",
    "group_rows",
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
    # A held unique key, or a debounce key whose pending job takes the enqueue in, makes
    # the enqueue return another job's id: the next step would wait for a job that was
    # never created.
    for spec in specs:
        if spec.unique is not None:
            raise ValueError(f"{what}: unique keys are not supported inside a {what}")
        if spec.debounce is not None:
            raise ValueError(f"{what}: debounced jobs are not supported inside a {what}")


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


def decoded(text: bytes | str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return reply_text(text)  # written by hand, not JSON: handed over as text


async def chained(
    specs: Sequence[JobSpec],
    shards: int,
    locate: Callable[[str], Awaitable[Any]],
    ordered: frozenset[str] = frozenset(),
) -> tuple[list[JobSpec], dict[str, int]]:
    """The steps of a chain, each after the one before (and after its own ``after``),
    and the shard of each step and of each job from before that a step waits for first
    (``locate``: the Shard that holds a job, found where it is, one read each, as its id
    may name another shard). A first step of an ordered name (``ordered``, or its own
    ``ordered``) goes where its name routes it, the chain after it."""
    _no_unique(specs, "chain")
    linked: list[JobSpec] = []
    previous: str | None = None
    placed = {p: (await locate(p)).index for p in {s.after[0] for s in specs if s.after}}
    for spec in specs:
        after = spec.after if previous is None else (*spec.after, previous)
        # Over several shards a step goes where its first parent is (see
        # rota.protocol.shards), a step before it wherever its id points: an id drawn
        # here names that shard, so that a reader finds the step from its id alone.
        shard = placed.get(after[0], shard_of(after[0], shards)) if after else None
        if shard is None and (spec.ordered or spec.name in ordered):
            shard = shard_of(spec.name, shards)
        # (A parent in a shard only the old count has, during a change, names none.)
        named = shard is not None and shard < shards
        job_id = spec.job_id or (new_id_in(shard, shards) if named else new_id())  # type: ignore[arg-type]
        placed[job_id] = shard_of(job_id, shards) if shard is None else shard
        linked.append(msgspec.structs.replace(spec, job_id=job_id, after=after))
        previous = job_id
    return linked, placed


def group_rows(
    specs: Sequence[JobSpec],
    then: JobSpec | None,
    group_id: str | None,
    row: Callable[..., EnqueueRow],
) -> tuple[str, list[EnqueueRow]]:
    """The group's id and its rows (``row``: a spec's row, with the group's fields),
    the callback's last (see :meth:`rota.Client.group`)."""
    if not specs:
        raise ValueError("group: give at least one job")
    _no_unique([*specs, *([then] if then else [])], "group")
    if group_id is not None and not (NAME_RE.match(group_id) and len(group_id) <= 100):
        raise ValueError(f"group: invalid group id {group_id!r} (up to 100 of A-Z a-z 0-9 _ . : -)")
    gid = group_id or _group_id(specs)
    if group_id is not None:
        specs = [
            s if s.job_id else msgspec.structs.replace(s, job_id=f"{gid}-{i}")
            for i, s in enumerate(specs)
        ]
    rows = [row(s, group=gid, group_size=len(specs)) for s in specs]
    if len({r.id for r in rows}) < len(rows):
        raise ValueError("group: a job id is given twice")
    if then is not None:
        then = then if then.job_id else msgspec.structs.replace(then, job_id=f"{gid}-then")
        rows.append(row(then, waits_group=gid))
    return gid, rows
