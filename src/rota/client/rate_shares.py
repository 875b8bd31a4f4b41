"""Rates that follow the work: a rate limit of r over K shards, its parts moved by the
same passes as the concurrency limits' (:mod:`rota.client.balance`).

Shard 0 keeps the whole rate (``{ns}:ratetotals``, ``<count>/<period ms>``); each shard
its part in ``{tag}:rates``, which its fetches check as one shard checks its rate (a
part of 0 starts nothing there). A pass shares r equally between the shards where jobs
of the name wait (between all shards when none waits), lowers first and raises by at
most what is free, counts as rebalance.lua writes them (down to a millionth, never up):
the parts never add up to more than r.

A move can still start a few more jobs than r over a short window, as each shard's
bucket (the fetch's GCRA) lets a shard that was idle start a burst of up to 100 ms of
its part, or two jobs: over a window that holds one move, at most 100 ms worth of r
plus two starts per shard raised.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from rota.client.rules import gather
from rota.protocol.calls import Scope
from rota.protocol.job import reply_text
from rota.protocol.keys import fixed_key
from rota.protocol.rate import Rate
from rota.wire.conn import hash_pairs


class Step(Protocol):
    """What :class:`Shares` reads of its pass (rota.client.balance.Pass)."""

    scopes: list[Scope]
    number: int
    names: list[str]
    rates: dict[str, Rate]
    seen: list[list[Any]]


__all__ = [
    "Shares",
    "Step",
    "floor6",
    "plan_rate",
    "rate_part",
    "read_rate_totals",
    "rlower",
    "rraise",
]

log = structlog.get_logger("rota.limits")


def floor6(x: float) -> float:
    """``x`` down to a millionth, as rebalance.lua writes a part."""
    return math.floor(x * 1e6) / 1e6


def rate_part(raw: Any, period: int) -> tuple[float | None, bool]:
    """A rate's part as stored, in starts per ``period`` ms: (None, False) for none, (0,
    True) for garbage."""
    if raw is None or raw is False:
        return None, False
    count, _, per = reply_text(raw).partition("/")
    try:
        c, p = float(count), int(per)
    except ValueError:
        return 0.0, True
    if not (0 <= c <= 1e9) or p <= 0 or not count.replace(".", "", 1).isdigit():
        return 0.0, True
    return c * period / p, False


def plan_rate(total: float, parts: Sequence[float | None], waiting: Sequence[int]) -> list[float]:
    """Each shard's target part of a rate of ``total``: equal shares between the shards
    with a part where jobs wait, else between all shards with a part."""
    live = [i for i, p in enumerate(parts) if p is not None]
    busy = [i for i in live if waiting[i] > 0] or live
    targets = [0.0] * len(parts)
    for i in busy:
        targets[i] = floor6(total / len(busy))
    return targets


async def read_rate_totals(scope: Scope) -> dict[str, Rate]:
    """The whole rates of shard 0 ``scope``, by name; garbage left out, with one line."""
    raw = await scope.conn.execute_command("HGETALL", fixed_key(scope.prefix, "rate_totals"))
    out: dict[str, Rate] = {}
    for name, value in hash_pairs(raw):
        rate = Rate.from_stored(reply_text(value))
        if rate is None:
            log.warning("whole rate is no rate: left out", name=name, held=value)
            continue
        out[reply_text(name)] = rate
    return out


async def rlower(scope: Scope, targets: Sequence[tuple[str, int, float]]) -> list[float | None]:
    """Lower each name's rate part (name, period, target): the parts after (None: the
    shard holds none)."""
    if not targets:
        return []
    args = [x for name, period, target in targets for x in (name, period, repr(target))]
    got = await scope.call("rebalance", ["rlower", *args])
    after = [float(reply_text(got[2 * i])) for i in range(len(targets))]
    return [None if a < 0 else a for a in after]


async def rraise(scope: Scope, number: int, by: Sequence[tuple[str, int, float]]) -> bool:
    """Raise each name's rate part (name, period, amount) under lease ``number``: False
    when a newer lease read the shard since."""
    if not by:
        return True
    args = [x for name, period, amount in by for x in (name, period, repr(amount))]
    return isinstance(await scope.call("rebalance", ["rraise", number, *args]), list)


class Shares:
    """The rate half of a :class:`Pass` (see :mod:`rota.client.rate_shares`)."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.parts: list[list[float | None]] = []  # per name, per shard: in its period
        self.targets: list[list[float]] = []

    def plan(self) -> None:
        step = self.step
        for j, name in enumerate(step.names):
            rate = step.rates.get(name)
            seen = step.seen[j]
            parts = [rate_part(s.rate, rate.period_ms)[0] if rate else None for s in seen]
            self.parts.append(parts)
            waiting = [s.waiting for s in seen]
            self.targets.append(plan_rate(rate.count, parts, waiting) if rate else [])

    def _garbage(self, j: int, i: int) -> bool:
        rate = self.step.rates[self.step.names[j]]
        return rate_part(self.step.seen[j][i].rate, rate.period_ms)[1]

    async def lower(self) -> None:
        step = self.step
        lows: list[list[tuple[int, str, int, float]]] = [[] for _ in step.scopes]
        for j, name in enumerate(step.names):
            if name not in step.rates:
                continue
            period = step.rates[name].period_ms
            for i, part in enumerate(self.parts[j]):
                target = self.targets[j][i]
                stale = _period_of(step.seen[j][i].rate) != period
                if part is not None and (target < part or stale or self._garbage(j, i)):
                    if self._garbage(j, i):
                        log.warning(
                            "rate part is no rate: counted as 0",
                            key=fixed_key(step.scopes[i].prefix, "rates"),
                            name=name,
                            held=reply_text(step.seen[j][i].rate)[:64],
                        )
                    lows[i].append((j, name, period, target))
        got = await gather(
            [
                functools.partial(rlower, s, [(n, p, t) for _, n, p, t in low])
                for s, low in zip(step.scopes, lows, strict=True)
            ]
        )
        for i, (low, after) in enumerate(zip(lows, got, strict=True)):
            for (j, _, _, _), part in zip(low, after, strict=True):
                self.parts[j][i] = part

    async def grow(self) -> bool:
        step = self.step
        ups: list[list[tuple[str, int, float]]] = [[] for _ in step.scopes]
        for j, name in enumerate(step.names):
            if name not in step.rates:
                continue
            rate = step.rates[name]
            free = floor6(rate.count - sum(p for p in self.parts[j] if p is not None))
            for i, part in enumerate(self.parts[j]):
                want = floor6(self.targets[j][i] - part) if part is not None else 0.0
                if want > 0 and free > 0:
                    ups[i].append((name, rate.period_ms, min(want, free)))
                    free = floor6(free - min(want, free))
        number = step.number
        raised = await gather(
            [
                functools.partial(rraise, s, number, up)
                for s, up in zip(step.scopes, ups, strict=True)
            ]
        )
        return all(raised)


def _period_of(raw: Any) -> int | None:
    _, _, per = reply_text(raw).partition("/") if raw else ("", "", "")
    return int(per) if per.isdigit() else None
