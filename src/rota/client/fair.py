"""Fair keys, the operator's side: the settings of one key of a job name and a read of
the keys with the largest backlog, as methods of :class:`rota.client.admin.Admin`
(``client.admin``). Within a job name, jobs that carry a fair key (``fair_key=`` at
enqueue) take turns by key (weighted round robin, FIFO within a key); see "Fair keys"
in docs/protocol.md for what each setting does in Redis.

A key lives in the shard its key names (keyed jobs are routed by key, see
:mod:`rota.protocol.shards`): a key's setting is written there whole, so that its limit
and rate are exact; the default limit of a name's keys is written to every shard (it
applies to each key in its shard). Every number is checked against
``rota.protocol.bounds.FAIR``; a key against ``rota.client.spec.FAIR_KEY_RE``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from rota.client.spec import check_fair_key
from rota.protocol import calls
from rota.protocol.bounds import FAIR, checked
from rota.protocol.job import opt_int, reply_text, validate_name
from rota.protocol.rate import Rate, parse_rate

if TYPE_CHECKING:
    from rota.client.routing import Shards
    from rota.client.shard import Shard

__all__ = ["FairAdmin", "FairKeyInfo", "setting"]


class FairKeyInfo(msgspec.Struct, frozen=True):
    """Figures and settings of one fair key of a job name: ``queued`` and ``running``
    jobs, its concurrency ``limit`` (its own, else the name's default; None: none),
    ``weight`` (1 when not set), whether it is ``paused``, and its ``rate`` as written
    (``"10/s"``; None: none)."""

    key: str
    queued: int
    running: int
    limit: int | None
    weight: int
    paused: bool
    rate: str | None = None


class FairAdmin:
    """The fair-key methods of :class:`~rota.client.admin.Admin` (a mixin: it needs the
    admin's routing table, ``_route``)."""

    _route: Shards

    def _of(self, name: str, key: str) -> tuple[str, str, Shard]:
        """``name`` and ``key`` checked, and the shard the key lives in."""
        validate_name(name)
        check_fair_key(key, "key")
        return name, key, self._route.named(key)

    async def _set(self, name: str, key: str, what: str, value: str = "") -> None:
        """A setting of ``key`` of ``name`` written where the key lives: in its old home
        too while a change of the shard count is under way (its jobs from before are
        there until they end)."""
        name, key, shard = self._of(name, key)
        for there in dict.fromkeys((self._route.home(key), shard)):
            await calls.fair_key(there.scope, what, name, key, value)

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
            await self._route.each(lambda s: calls.fair_key(s.scope, "limit", name, "", value))
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
        name, key, _ = self._of(name, key)

        async def clear(shard: Shard) -> int:
            total = 0
            while True:
                n = await calls.delete(shard.scope, "key", [key], name=name, limit=500)
                total += n
                if n < 500:
                    return total

        return sum(await self._route.each(clear))

    async def fair_keys(self, name: str, top: int = 20) -> list[FairKeyInfo]:
        """The ``top`` keys (1..1000) of ``name`` with the largest backlog, largest first,
        with their running count and settings: a read of ``top`` keys per shard, whatever
        the number of keys (a key with running jobs and none queued is not listed)."""
        validate_name(name)
        checked("top", top, FAIR["top"])
        each = await self._route.each(lambda s: _top_keys(s, name, top))
        rows: dict[str, FairKeyInfo] = {}
        for found in each:
            for row in found:
                seen = rows.get(row.key)
                rows[row.key] = row if seen is None else _merged(seen, row)
        return sorted(rows.values(), key=lambda r: (-r.queued, r.key))[:top]


def _merged(a: FairKeyInfo, b: FairKeyInfo) -> FairKeyInfo:
    """One key's rows of two shards: its figures added up, the settings of the shard
    its key names (the one with more jobs, else the first)."""
    main = a if a.queued >= b.queued else b
    return msgspec.structs.replace(main, queued=a.queued + b.queued, running=a.running + b.running)


async def _top_keys(shard: Shard, name: str, top: int) -> list[FairKeyInfo]:
    """:meth:`FairAdmin.fair_keys` of one shard: two round trips."""
    k = shard.keys
    (ranked,) = await shard.piped(
        lambda p: [p.zrevrange(k.fair_backlog(name), 0, top - 1, withscores=True)]
    )
    keys = [(reply_text(key), _count(score)) for key, score in ranked]
    if not keys:
        return []
    replies = await shard.piped(
        lambda p: [
            (
                p.zcard(k.fair_running(name, key)),
                p.hmget(k.fair_set(name), f"w/{key}", f"l/{key}", "l*", f"r/{key}", f"p/{key}"),
            )
            for key, _ in keys
        ],
        errors=False,
    )
    return [
        _row(key, queued, running, fields)
        for (key, queued), running, fields in zip(keys, replies[0::2], replies[1::2], strict=True)
    ]


def _count(score: float) -> int:
    """A backlog score as a count of jobs: one written by hand that is none (negative,
    infinite) reads as 0, so one key's garbage never fails the read of the others."""
    return int(score) if 0 <= score < math.inf else 0


def setting(value: bytes | str | None, bound: str) -> int | None:
    """A stored whole-number setting of a key (``"weight"``, ``"limit"``) as the fetch
    reads it: absent, garbage or outside ``FAIR[bound]`` reads as None (not set)."""
    number = opt_int(value)
    lo, hi = FAIR[bound].lo, FAIR[bound].hi
    return number if number is not None and lo <= number <= hi else None


def _row(key: str, queued: int, running: object, fields: object) -> FairKeyInfo:
    """A key's row, its settings read as the fetch reads them (garbage: the default)."""
    w, own, default, rate, paused = fields if isinstance(fields, Sequence) else (None,) * 5
    limit = setting(own, "limit")
    stored = Rate.from_stored(reply_text(rate)) if rate else None
    return FairKeyInfo(
        key,
        queued,
        running if isinstance(running, int) else 0,
        setting(default, "limit") if limit is None else limit,
        setting(w, "weight") or 1,
        paused is not None,
        None if stored is None else str(stored),
    )
