"""The operator's actions on one job wherever it waits, and the clean of a set by age, as
the methods of :class:`JobActions` (``client.admin.jobs``): delete a queued job or
move it to the front of its queue, kill a job of the retry set, and delete the jobs of
the dead, retry and scheduled sets, or the kept complete jobs, older than an age.

Each is one call of ``lua/operate.lua`` on the job's shard,
which decides from what Redis holds at that moment: a job a pool fetched, finished or
retried between the operator's look and the action is left alone, and the answer says
nothing was done (False, or a count without it), so no job is lost or run twice. A job
is found on the shard its id names, then on the others (see
:meth:`rota.client.routing.Shards.by_id`).

"Run now" of a queued job is :meth:`JobActions.to_front`: a job cannot start sooner than
being the next fetched with a pool woken for it; a paused name, or one at its
concurrency or rate limit, holds it as it holds the rest. For the scheduled and retry
sets, "run now" is :meth:`rota.client.admin.Admin.retry` (the job is queued now,
behind the jobs queued already); :meth:`to_front` after it puts it first.

A clean reads each shard's set :data:`CLEAN_CHUNK` entries per call, so a call blocks
Redis for under a millisecond (0.5 to 0.85 ms measured in several runs, with and
without a name, on 100,000 dead jobs), however large the set. Moving a job to the
front, or deleting it from its queue, finds it with ``LREM``, whose cost grows with the
queue: 4 to 15 ms for a queue of 100,000 on a busy two-core host (as the queue's
``delete`` of chosen ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal, get_args

from rota.protocol import operator_calls
from rota.protocol.bounds import TEN_YEARS, Bound, checked
from rota.protocol.job import Reason, validate_name

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = ["CLEANED", "CLEAN_CHUNK", "MAX_AGE", "MAX_ERROR", "MAX_KILL", "Cleaned", "JobActions"]

#: The sets a clean deletes from: the kept complete jobs beside three job sets.
Cleaned = Literal["dead", "retry", "scheduled", "complete"]
CLEANED: Final[tuple[Cleaned, ...]] = get_args(Cleaned)
#: Entries of a set one call of a clean reads (and at most deletes): about 5 µs of
#: Redis each (a read of the record, its keys deleted).
CLEAN_CHUNK: Final = 100
#: The oldest age a clean takes, in seconds (ten years); 0 is every job up to now.
MAX_AGE: Final = TEN_YEARS
#: The most ids one kill takes, and the longest error it writes.
MAX_KILL: Final = 1000
MAX_ERROR: Final = 1000


class JobActions:
    """The actions on one job and the clean by age (``client.admin.jobs``, see the
    module), over the shards of ``route``."""

    def __init__(self, route: Shards) -> None:
        self._route = route

    async def to_front(self, job_id: str) -> bool:
        """Move a queued job to the front of its queue, so that it is fetched next among
        its name's jobs (a keyed job: first of its fair key, and its key takes the next
        turn), and wake an idle pool for it: "run now" for a queued job. False when the
        job is in no queue (a pool took it, it finished, it was deleted, or it is in
        another state)."""
        return await self._route.by_id(job_id, lambda s: operator_calls.to_front(s.scope, job_id))

    async def delete_queued(self, job_id: str) -> bool:
        """Delete a queued job (its record, log and holds; what waits for it ends dead
        with reason ``dependency_failed``). False when the job is in no queue: a pool
        that took it meanwhile runs it, untouched."""
        return await self._route.by_id(job_id, lambda s: operator_calls.unqueue(s.scope, job_id))

    async def kill(self, ids: Sequence[str], error: str = "killed by an operator") -> int:
        """Move jobs of the retry set to the dead set now, with reason ``killed`` and
        ``error``, without another try (what waits for them fails, as for any dead
        job): how many were still in the retry set. At most :data:`MAX_KILL` ids, and an
        ``error`` of at most :data:`MAX_ERROR` characters."""
        ids = list(dict.fromkeys(ids))
        if len(ids) > MAX_KILL:
            raise ValueError(f"ids: at most {MAX_KILL} at once, got {len(ids)}")
        if len(error) > MAX_ERROR:
            raise ValueError(f"error: at most {MAX_ERROR} characters, got {len(error)}")
        if not ids:
            return 0
        each = await self._route.each(
            lambda s: operator_calls.kill(s.scope, Reason.KILLED.value, error, ids)
        )
        return sum(each)

    async def clean(self, which: Cleaned, older_than: float, name: str | None = None) -> int:
        """Delete the jobs of ``which`` older than ``older_than`` seconds (0 to ten
        years; 0: every one up to now), of job name ``name`` only when given: the dead
        and kept complete jobs by when they ended, the retry and scheduled ones by when
        they were enqueued. Returns how many were deleted. Each shard's set is read
        :data:`CLEAN_CHUNK` entries per call; a job that moves meanwhile (a retry due,
        a dead job retried) is left where it went."""
        if which not in CLEANED:
            raise ValueError(f"which: one of {', '.join(CLEANED)}, not {which!r}")
        checked("older_than", older_than, Bound(0, MAX_AGE))
        if name is not None:
            validate_name(name)
        age_ms = round(older_than * 1000)

        async def clean(shard: Shard) -> int:
            start = total = 0
            while True:
                deleted, read = await operator_calls.clean(
                    shard.scope, which, age_ms, name or "", start, CLEAN_CHUNK
                )
                total += deleted
                start += read - deleted
                if read < CLEAN_CHUNK:
                    return total

        return sum(await self._route.each(clean))
