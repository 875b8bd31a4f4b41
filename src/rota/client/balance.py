"""Limits that follow the work: a concurrency limit of n over K shards, placed where the
jobs of its name wait.

Each shard keeps its *part* of the limit (``{tag}:limits``), which its fetches check as
one shard checks its limit: the hot path reads nothing more. The whole limit lives in
shard 0 (``{ns}:limittotals``). A *pass* (:func:`balance`) moves the parts:

1. it reads every shard's part, running and waiting jobs of each limited name, one
   script call per shard (``rebalance.lua``, ``read``), which also records the pass's
   lease number in the shard (the fence);
2. it plans the targets (:func:`plan`): each shard keeps what runs there, and what is
   left of n goes to the shards where jobs wait, in proportion, the rest evenly; the
   targets add up to n exactly;
3. it **lowers** every part above its target, each by one atomic call on its shard that
   never lowers a part below what runs there at that moment;
4. only once every lower has answered, it **raises** the parts below their targets, by
   at most what the lowers left free (n minus the parts after them), each raise refused
   in a shard that a newer lease has read since (a holder whose lease ran out while it
   was stopped cannot raise on stale figures).

So the parts never add up to more than n, whenever a pass stops: a pass cut short
after its lowers leaves capacity unused until the next pass (one heartbeat interval
later, by whichever pool then holds the lease) places it again. A part that is no whole
number in 0..1e9 (written by hand) counts as 0, with one warning line, and the pass
writes it back clean.

One pass runs at a time: the pools take a lease in shard 0 (``{ns}:rebalancer``, ``SET``
with ``PX``; see :mod:`rota.worker.rebalance`). The pass works over whatever list of
shards it is given, so a pool that serves more shards than the namespace's count (while
the count changes) passes them all.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import structlog

from rota.client.rate_shares import Shares, floor6, read_rate_totals, rlower
from rota.client.rules import gather
from rota.protocol.calls import Scope
from rota.protocol.job import reply_text
from rota.protocol.keys import fixed_key
from rota.protocol.rate import Rate
from rota.wire.conn import hash_pairs

__all__ = [
    "MAX_PART",
    "Pass",
    "Seen",
    "balance",
    "lead",
    "leave",
    "lower",
    "parse_part",
    "place",
    "plan",
    "raise_by",
    "read",
    "read_totals",
    "set_whole",
    "set_whole_rate",
]

log = structlog.get_logger("rota.limits")

#: The largest part a shard may hold, as rebalance.lua checks it.
MAX_PART = 1_000_000_000


class Seen(NamedTuple):
    """One shard's figures for one name, as a pass read them. ``part`` None: the shard
    holds no part (its fetches see no limit; a pass leaves it so)."""

    part: int | None
    running: int
    waiting: int
    garbage: bool = False
    rate: Any = None  # its rate's part as stored (rota.client.rate_shares)


def parse_part(raw: Any) -> tuple[int | None, bool]:
    """A part as stored: (its number, False); (None, False) when there is none; (0, True)
    when it is no whole number in 0..MAX_PART."""
    if raw is None or raw is False:
        return None, False
    text = reply_text(raw)
    if text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= MAX_PART:
        return int(text), False
    return 0, True


def plan(limit: int, seen: Sequence[Seen]) -> list[int]:
    """The target part of each shard: what runs there, then what is left of ``limit``
    shared by the waiting jobs (largest remainders first, at most a shard's waiting
    jobs each), then the rest evenly. Shards with no part get 0 and count for nothing.
    The targets add up to ``limit`` whenever what runs does not exceed it (else each
    target is what runs)."""
    live = [i for i, s in enumerate(seen) if s.part is not None]
    targets = [0] * len(seen)
    for i in live:
        targets[i] = seen[i].running
    free = limit - sum(targets)
    if free <= 0 or not live:
        return targets
    waits = {i: seen[i].waiting for i in live if seen[i].waiting > 0}
    total = sum(waits.values())
    if total:
        give = min(free, total)
        for i, w in waits.items():
            targets[i] += give * w // total
        rest = give - sum(give * w // total for w in waits.values())
        by_remainder = sorted(waits, key=lambda i: (-(give * waits[i] % total), i))
        for i in by_remainder[:rest]:
            targets[i] += 1
        free -= give
    each, rest = divmod(free, len(live))
    for j, i in enumerate(live):
        targets[i] += each + (1 if j < rest else 0)
    return targets


async def lead(scope: Scope, holder: str, ms: int) -> int:
    """Take or renew the lease of shard 0 ``scope`` for ``ms``: its number, 0 when
    another holder has it."""
    return int(await scope.call("rebalance", ["lead", holder, ms]))


async def leave(scope: Scope, holder: str) -> bool:
    """Give the lease up (whether ``holder`` had it)."""
    return bool(await scope.call("rebalance", ["leave", holder]))


async def read_totals(scope: Scope) -> dict[str, int]:
    """The whole limits of shard 0 ``scope``, by name; one that is no whole number in
    1..MAX_PART is left out, with one warning line (its parts stay where they are)."""
    raw = await scope.conn.execute_command("HGETALL", fixed_key(scope.prefix, "limit_totals"))
    out: dict[str, int] = {}
    for name, value in hash_pairs(raw):
        n, garbage = parse_part(value)
        if garbage or not n:
            log.warning("whole limit is no whole number in 1..1e9: left out", name=name, held=value)
            continue
        out[reply_text(name)] = n
    return out


async def read(scope: Scope, number: int, names: Sequence[str]) -> list[Seen] | int:
    """Each name's figures in one shard, recording ``number`` there; when a newer lease
    read the shard, that lease's number instead (this pass must stop)."""
    got = await scope.call("rebalance", ["read", number, *names])
    if not isinstance(got, list):
        fence = reply_text(got).partition(" ")[2]
        return int(fence) if fence.isdigit() else 0
    out = []
    for at, name in enumerate(names):
        part, garbage = parse_part(got[4 * at])
        if garbage:
            log.warning(
                "limit part is no whole number in 0..1e9: counted as 0",
                key=fixed_key(scope.prefix, "limits"),
                name=name,
                held=reply_text(got[4 * at])[:64],
            )
        running, waiting, rate = got[4 * at + 1 : 4 * at + 4]
        out.append(Seen(part, int(running), int(waiting), garbage, rate or None))
    return out


async def lower(scope: Scope, targets: Sequence[tuple[str, int]]) -> list[int | None]:
    """Lower each name's part toward its target (never below what runs there now): the
    parts after (None: the shard holds no part of the name)."""
    if not targets:
        return []
    got = await scope.call("rebalance", ["lower", *(x for t in targets for x in t)])
    return [None if int(got[2 * i]) < 0 else int(got[2 * i]) for i in range(len(targets))]


async def raise_by(scope: Scope, number: int, by: Sequence[tuple[str, int]]) -> bool:
    """Raise each name's part by its amount, under lease ``number``: False when a newer
    lease read the shard since (nothing raised)."""
    if not by:
        return True
    got = await scope.call("rebalance", ["raise", number, *(x for t in by for x in t)])
    return isinstance(got, list)


class Pass:
    """One pass over the shards ``scopes`` (see the module) under lease ``number``, in
    its three steps, each one call per shard: :meth:`read`, :meth:`lower`, :meth:`grow`.
    A pass stopped after any step leaves the parts adding up to no more than before it
    (or than the whole, whichever is more)."""

    def __init__(
        self,
        scopes: Sequence[Scope],
        number: int,
        totals: dict[str, int],
        rates: dict[str, Rate] | None = None,
    ) -> None:
        self.scopes, self.number, self.totals = list(scopes), number, totals
        self.rates = rates or {}
        self.names = sorted(set(totals) | set(self.rates))
        self.seen: list[list[Seen]] = []  # per name, per shard
        self.targets: list[list[int]] = []
        self.after: list[list[int | None]] = []  # per name, per shard: parts after lowers
        self.shares = Shares(self)
        self.fence = 0  # the newer lease number that fenced this pass off, if one did

    async def read(self) -> bool:
        """Read and plan: False when a newer lease read a shard (the pass stops)."""
        scopes, names = self.scopes, self.names
        reads = await gather([functools.partial(read, s, self.number, names) for s in scopes])
        self.fence = max((r for r in reads if isinstance(r, int)), default=0)
        if self.fence:
            return False
        self.seen = [[r[j] for r in reads if not isinstance(r, int)] for j in range(len(names))]
        self.targets = [plan(self.totals.get(n, 0), self.seen[j]) for j, n in enumerate(names)]
        self.after = [[s.part for s in seen] for seen in self.seen]
        self.shares.plan()
        return True

    async def lower(self) -> None:
        """Lower every part above its target, and write garbage back clean."""
        lows: list[list[tuple[int, str, int]]] = [[] for _ in self.scopes]
        for j, name in enumerate(self.names):
            if name not in self.totals:
                continue
            for i, s in enumerate(self.seen[j]):
                if s.part is not None and (s.garbage or self.targets[j][i] < s.part):
                    lows[i].append((j, name, self.targets[j][i]))
        pairs = [[(n, t) for _, n, t in low] for low in lows]
        lowered = await gather(
            [functools.partial(lower, s, p) for s, p in zip(self.scopes, pairs, strict=True)]
        )
        for i, (low, got) in enumerate(zip(lows, lowered, strict=True)):
            for (j, _, _), part in zip(low, got, strict=True):
                self.after[j][i] = part
        await self.shares.lower()

    async def grow(self) -> bool:
        """Raise the parts below their targets by at most what is free of each whole once
        the lowers are in (the caller awaits :meth:`lower` first): False when a newer
        lease read a shard since (its raises refused)."""
        ups: list[list[tuple[str, int]]] = [[] for _ in self.scopes]
        for j, name in enumerate(self.names):
            if name not in self.totals:
                continue
            after, targets = self.after[j], self.targets[j]
            free = self.totals[name] - sum(p for p in after if p is not None)
            wants = [
                (i, targets[i] - p) for i, p in enumerate(after) if p is not None and targets[i] > p
            ]
            for i, want in sorted(wants, key=lambda w: (-self.seen[j][w[0]].waiting, w[0])):
                if free <= 0:
                    break
                ups[i].append((name, min(want, free)))
                free -= min(want, free)
        number = self.number
        raised = await gather(
            [
                functools.partial(raise_by, s, number, up)
                for s, up in zip(self.scopes, ups, strict=True)
            ]
        )
        return all(raised) and await self.shares.grow()


async def balance(
    scopes: Sequence[Scope],
    number: int,
    totals: dict[str, int],
    rates: dict[str, Rate] | None = None,
    holder: str = "",
) -> bool:
    """One pass (:class:`Pass`): whether it ran to its end (False: a newer lease fenced
    it off)."""
    if not totals and not rates:
        return True
    step = Pass(scopes, number, totals, rates)
    if not await step.read():
        # Fenced off: by a newer holder, or by a number shard 0 lost (restarted without
        # persistence). Either way the count goes past it and this lease ends, so that
        # the next lease is one no shard refuses.
        await scopes[0].call("rebalance", ["floor", holder, step.fence])
        return False
    await step.lower()
    return await step.grow()


async def set_whole(scopes: Sequence[Scope], name: str, limit: int | None) -> None:
    """An operator's limit of ``name`` over the shards ``scopes`` (shard 0 first): the
    whole in shard 0; a shard without a part gets 0; parts above the new whole are
    lowered at once in proportion (never below what runs); then, when no pool holds the
    lease, one pass places it now (else the holder's next pass does, within a heartbeat
    interval). None removes the limit and every part."""
    home = scopes[0]
    totals = fixed_key(home.prefix, "limit_totals")
    if limit is None:
        await home.conn.execute_command("HDEL", totals, name)
        await gather([functools.partial(_drop, s, name) for s in scopes])
        return
    await home.conn.execute_command("HSET", totals, name, limit)
    held = await gather([functools.partial(_part_of, s, name) for s in scopes])
    now = [parse_part(raw)[0] or 0 for raw in held]
    if sum(now) > limit:
        scaled = [p * limit // sum(now) for p in now]
        await gather(
            [functools.partial(lower, s, [(name, t)]) for s, t in zip(scopes, scaled, strict=True)]
        )
    await place(scopes)


async def set_whole_rate(scopes: Sequence[Scope], name: str, rate: Rate | None) -> None:
    """An operator's rate of ``name``, as :func:`set_whole` writes a limit: the whole in
    shard 0; parts lowered at once to an even share (r / K, never up), then placed by a
    pass (now when no pool holds the lease)."""
    home = scopes[0]
    totals = fixed_key(home.prefix, "rate_totals")
    if rate is None:
        await home.conn.execute_command("HDEL", totals, name)
    else:
        await home.conn.execute_command("HSET", totals, name, rate.stored)
    even = None if rate is None else (name, rate.period_ms, floor6(rate.count / len(scopes)))
    await gather([functools.partial(_even_rate, s, name, even) for s in scopes])
    await place(scopes)


async def place(scopes: Sequence[Scope]) -> None:
    """One pass now, under a lease of its own, unless a pool holds the lease (its next
    pass places what changed)."""
    home, holder = scopes[0], f"operator {uuid.uuid4().hex}"
    number = await lead(home, holder, 5000)
    if number:
        try:
            totals, rates = await read_totals(home), await read_rate_totals(home)
            await balance(scopes, number, totals, rates, holder)
        finally:
            await leave(home, holder)


async def _even_rate(scope: Scope, name: str, even: tuple[str, int, float] | None) -> None:
    key = fixed_key(scope.prefix, "rates")
    if even is None:
        await scope.conn.execute_command("HDEL", key, name)
    else:
        await scope.conn.execute_command("HSETNX", key, name, f"0/{even[1]}")
        await rlower(scope, [even])
    wake = fixed_key(scope.prefix, "ready")  # the name's queue may have room again
    await scope.conn.execute_command("SADD", wake, name)


async def _drop(scope: Scope, name: str) -> None:
    await scope.conn.execute_command("HDEL", fixed_key(scope.prefix, "limits"), name)
    await scope.conn.execute_command("SADD", fixed_key(scope.prefix, "ready"), name)


async def _part_of(scope: Scope, name: str) -> Any:
    """The part of ``name`` (written 0 where there is none, so that the shard's fetches
    see a limit; the name joins the ready set, as a changed limit may leave room)."""
    key = fixed_key(scope.prefix, "limits")
    await scope.conn.execute_command("HSETNX", key, name, 0)
    await scope.conn.execute_command("SADD", fixed_key(scope.prefix, "ready"), name)
    return await scope.conn.execute_command("HGET", key, name)
