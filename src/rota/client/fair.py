"""Fair keys, the operator's side: the settings of one key of a job name, a read of the
keys worth a look (:mod:`rota.client.fair_top`) and of one key's jobs
(:mod:`rota.client.fair_jobs`), as the methods of :class:`FairKeys`
(``client.admin.fair``). Within a job name, jobs that carry a fair key (``fair_key=`` at
enqueue) take turns by key (weighted round robin, FIFO within a key); see "Fair keys"
in docs/protocol.md for what each setting does in Redis.

A key lives in the shard its key names (keyed jobs are routed by key, see
:mod:`rota.protocol.shards`): a key's setting is written there whole, so that its limit
and rate are exact; the default limit of a name's keys is written to every shard (it
applies to each key in its shard). Every number is checked against
``rota.protocol.bounds.FAIR``; a key against ``rota.client.spec.FAIR_KEY_RE``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.client.fair_jobs import FAIR_JOBS, FairKeyJobs, key_jobs
from rota.client.fair_top import FairKeyInfo, merged, ranked, setting
from rota.client.methods import renamed
from rota.client.spec import check_fair_key
from rota.protocol import operator_calls
from rota.protocol.bounds import FAIR, checked
from rota.protocol.job import validate_name
from rota.protocol.rate import Rate, parse_rate

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = ["FairKeyInfo", "FairKeyJobs", "FairKeys", "setting"]


class FairKeys:
    """The fair keys of a namespace's job names (``client.admin.fair``, see the module),
    over the shards of ``route``."""

    def __init__(self, route: Shards) -> None:
        self._route = route

    def _checked(self, name: str, key: str) -> tuple[str, str, Shard]:
        """``name`` and ``key`` checked, and the shard the key lives in."""
        validate_name(name)
        check_fair_key(key, "key")
        return name, key, self._route.named(key)

    async def _set(self, name: str, key: str, what: str, value: str = "") -> None:
        """A setting of ``key`` of ``name`` written where the key lives: in its old home
        too while a change of the shard count is under way (its jobs from before are
        there until they end)."""
        name, key, shard = self._checked(name, key)
        for there in dict.fromkeys((self._route.home(key), shard)):
            await operator_calls.fair_key(there.scope, what, name, key, value)

    async def set_weight(self, name: str, key: str, weight: int | None) -> None:
        """Give ``key`` of job name ``name`` ``weight`` turns (1..1000) for every one of
        a key of weight 1 while both have jobs; None: back to 1. Takes effect at its
        next turn."""
        value = "" if weight is None else str(checked("weight", weight, FAIR["weight"]))
        await self._set(name, key, "weight", value)

    async def set_key_limit(self, name: str, key: str | None, limit: int | None) -> None:
        """Cap how many jobs of ``key`` run at once across all pools (1..1000000; None:
        no cap of its own). ``key`` None sets the default of every key of the name that
        has no limit of its own. Counted from the key's leases, like a name's limit, so
        it holds when pools die. A key at its limit waits out of the turns until one of
        its jobs ends."""
        value = "" if limit is None else str(checked("limit", limit, FAIR["limit"]))
        if key is None:
            validate_name(name)
            await self._route.each(
                lambda s: operator_calls.fair_key(s.scope, "limit", name, "", value)
            )
            return
        await self._set(name, key, "limit", value)

    async def set_key_rate(self, name: str, key: str, rate: str | Rate | None) -> None:
        """Cap how many jobs of ``key`` start per second, minute or hour across all
        pools (``"10/s"``, ``"30/min"``; None: no cap), spaced as a name's rate is
        (see :meth:`Admin.set_rate`). A key out of starts rests until its next start is
        due, out of the turns."""
        value = "" if rate is None else parse_rate(rate).stored
        await self._set(name, key, "rate", value)

    async def pause_key(self, name: str, key: str) -> None:
        """Stop workers from taking jobs of ``key`` of ``name``; its running jobs finish,
        and its jobs stay queued (enqueues go on)."""
        await self._set(name, key, "pause")

    async def resume_key(self, name: str, key: str) -> None:
        """Let workers take jobs of ``key`` again, at once."""
        await self._set(name, key, "resume")

    async def clear_key(self, name: str, key: str) -> int:
        """Delete every queued job of ``key`` of ``name`` (running ones finish); returns
        how many. A job of the key routed to another shard (by a group, unique key or
        parents) is deleted there too."""
        name, key, _ = self._checked(name, key)

        async def clear(shard: Shard) -> int:
            total = 0
            while True:
                n = await operator_calls.delete(shard.scope, "key", [key], name=name, limit=500)
                total += n
                if n < 500:
                    return total

        return sum(await self._route.each(clear))

    async def of(self, name: str, top: int = 20) -> list[FairKeyInfo]:
        """The ``top`` keys (1..1000) of ``name`` worth a look, with their running
        count and settings: those with the largest backlog, largest first, then those
        with jobs running and none queued, the most running first (found among the
        first ``RUNNING_SCAN`` jobs of the name's running set of each shard). Three round
        trips per shard whatever the number of keys, and one more each time drained keys'
        backlogs make it read on (:mod:`rota.client.fair_top`)."""
        validate_name(name)
        checked("top", top, FAIR["top"])
        each = await self._route.each(lambda s: ranked(s, [name], top, running=True))
        return _top([found[name] for found in each], top)

    async def of_names(self, names: Sequence[str], top: int) -> dict[str, list[FairKeyInfo]]:
        """The ``top`` keys (1..1000) with the largest backlog of each of ``names``
        (those with none left out), largest first: two round trips per shard whatever
        the number of names and keys (and at most four more where drained keys' backlogs
        make it read on), the read of ``/metrics?keys=top``."""
        for name in names:
            validate_name(name)
        checked("top", top, FAIR["top"])
        each = await self._route.each(lambda s: ranked(s, names, top, running=False))
        tops = {name: _top([found[name] for found in each], top) for name in names}
        return {name: rows for name, rows in tops.items() if rows}

    async def jobs(self, name: str, key: str, offset: int = 0, count: int = 50) -> FairKeyJobs:
        """A page of the queued jobs of ``key`` of ``name``, the next to run first
        (``offset`` 0..1e9, ``count`` 1..1000), and its first ``count`` running jobs;
        see :func:`rota.client.fair_jobs.key_jobs`."""
        name, key, home = self._checked(name, key)
        checked("offset", offset, FAIR_JOBS["offset"])
        checked("count", count, FAIR_JOBS["count"])
        return await key_jobs(self._route.all, home, name, key, offset, count)

    # The names these reads had before: kept one release, each warns.
    fair_keys = renamed("client.admin.fair", "fair_keys", "of")
    top_fair_keys = renamed("client.admin.fair", "top_fair_keys", "of_names")
    fair_key_jobs = renamed("client.admin.fair", "fair_key_jobs", "jobs")


def _top(found: list[list[FairKeyInfo]], top: int) -> list[FairKeyInfo]:
    """The rows of every shard merged by key, ranked: the most queued, then running."""
    rows: dict[str, FairKeyInfo] = {}
    for shard_rows in found:
        for row in shard_rows:
            seen = rows.get(row.key)
            rows[row.key] = row if seen is None else merged(seen, row)
    return sorted(rows.values(), key=lambda r: (-r.queued, -r.running, r.key))[:top]
